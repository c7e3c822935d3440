/**
 * The HTTP policy: a client of an OpenAI-compatible `POST {baseUrl}/chat/completions` endpoint (our
 * trainer's server, or anybody's). A bearer token, a timeout per request, retries with jittered
 * exponential back-off on 5xx and network errors, 429s (a full queue) retried after their Retry-After
 * plus jitter for up to `queueFullBudgetMs` without using up the retries, and HTTP 409 turned into
 * IterationClosedError so an episode of a closed iteration stops at once instead of retrying. With
 * `fallbackUrls` (trainer replicas holding the same θ), a network error or 5xx moves the episode to the
 * next server for this and every later turn.
 */
import { z } from 'zod';
import type { ActionConstraint, ChatMessage, Policy, PolicyContext, PolicyReply, ToolCall } from '../../shared/ports/policy.ts';
import type { GenerationOptions, PolicyEndpoint } from '../../shared/schemas/index.ts';
import { deriveSeed } from '../random.ts';
import { IterationClosedError, PolicyHttpError } from './http-errors.ts';
import { PinMismatchError, pinnedFetchByOrigin } from './pinned-fetch.ts';
import { OutboundError, OutboundPolicy } from '../outbound/address-policy.ts';
import { outboundFetch } from '../outbound/outbound-fetch.ts';

/** The most an external endpoint's answer may weigh: a chat completion is far smaller. */
const EXTERNAL_MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

export const HttpPolicyOptions = z.object({
  /** Up to the API version, e.g. http://127.0.0.1:8080/v1 (the OpenAI SDK's convention). */
  baseUrl: z.url(),
  model: z.string().min(1).max(200),
  token: z.string().min(1).optional(),
  temperature: z.number().min(0).max(5).default(0),
  topP: z.number().gt(0).max(1).default(1),
  /** 0 leaves top-k off; only sent when set (it is not part of the OpenAI API). */
  topK: z.number().int().min(0).default(0),
  maxTokens: z.number().int().min(1).max(32_768).default(32),
  /** Seeds each request's sampling as a function of (seed, step), so an episode replays exactly. */
  seed: z.number().int().min(0).max(0xffffffff).optional(),
  timeoutMs: z.number().int().min(1).max(3_600_000).default(60_000),
  /** Attempts after the first one. */
  retries: z.number().int().min(0).max(20).default(5),
  backoffBaseMs: z.number().min(0).default(200),
  backoffMaxMs: z.number().min(0).default(10_000),
  /** A Retry-After longer than this is cut to it (a server asking for minutes would stall the episode). */
  retryAfterMaxMs: z.number().min(0).default(30_000),
  /** How long one call may wait in all on 429s (a full queue) before they count as failures against `retries`. */
  queueFullBudgetMs: z.number().min(0).default(120_000),
  /**
   * Send the environment's action constraint as `guided_regex` / `guided_choice` (vLLM's fields, which the
   * trainer serves); when the environment offers tools and no constraint, ask for a call (`tool_choice: "required"`).
   */
  guidedDecoding: z.boolean().default(false),
  /** Base URLs of servers with the same weights, tried in turn after `baseUrl` fails (network error or 5xx). */
  fallbackUrls: z.array(z.url()).max(16).default([]),
  /**
   * Talk only to servers presenting exactly the certificate pinned for their origin (https://host:port,
   * pinned-fetch.ts): every URL, fallbacks included, must be https and have a pin of its own.
   */
  pinnedCertificates: z.record(z.string(), z.object({ certificate: z.string().min(1), sha256: z.string().min(1) })).optional(),
  /**
   * An endpoint that is not ours (an external agent's): calls go through environments/outbound/ under this policy
   * (checked address, no redirects, capped bodies), and errors name the status only, never the server's body.
   */
  outbound: OutboundPolicy.optional(),
});
export type HttpPolicyOptions = z.input<typeof HttpPolicyOptions>;

const ChatCompletion = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullable().optional(),
          tool_calls: z
            .array(z.object({ id: z.string().optional(), type: z.string().optional(), function: z.object({ name: z.string(), arguments: z.string().default('{}') }) }))
            .nullable()
            .optional(),
        }),
      }),
    )
    .min(1),
  usage: z
    .object({
      prompt_tokens: z.number().int().min(0),
      completion_tokens: z.number().int().min(0),
      prompt_tokens_details: z.object({ cached_tokens: z.number().int().min(0).nullable().optional() }).nullable().optional(),
    })
    .nullable()
    .optional(),
});

/** A reply's token counts from OpenAI's usage; `cached` only where the server reports it. */
function tokensOf(usage: z.infer<typeof ChatCompletion>['usage']): PolicyReply['tokens'] {
  const cached = usage?.prompt_tokens_details?.cached_tokens;
  return { prompt: usage?.prompt_tokens ?? 0, completion: usage?.completion_tokens ?? 0, ...(typeof cached === 'number' ? { cached } : {}) };
}

/** A failure worth another try (429, 5xx, a network error or timeout), with the server's wish if any. */
class Retryable extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    readonly retryAfterMs: number | null,
  ) {
    super(message);
  }
}

/** Retry-After is seconds or an HTTP date. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | null {
  if (value === null || value.trim() === '') return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** "Equal jitter": between half and all of the exponential step, so a burst of clients spreads apart. */
export function backoffMs(attempt: number, baseMs: number, maxMs: number, random = Math.random): number {
  const step = Math.min(maxMs, baseMs * 2 ** attempt);
  return step / 2 + random() * (step / 2);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** `tool_calls[].function.arguments` is a JSON string; a malformed one is kept as the raw string for the environment to reject. */
function parseToolArguments(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

function guidedFields(c: ActionConstraint): { guided_regex: string } | { guided_choice: string[] } {
  return 'regex' in c ? { guided_regex: c.regex } : { guided_choice: c.choice };
}

/**
 * A chat turn in the chat API's wire form: calls with JSON-text arguments, results with their call's id,
 * pictures as `image_url` parts. A `tool` turn may hold text only, so its pictures follow in a user turn.
 */
function wireMessages(m: ChatMessage): Record<string, unknown>[] {
  if (!m.images?.length) return [wireMessage(m)];
  const pictures = m.images.map((url) => ({ type: 'image_url', image_url: { url } }));
  if (m.role === 'tool') return [wireMessage(m), { role: 'user', content: pictures }];
  return [{ ...wireMessage(m), content: [{ type: 'text', text: m.content }, ...pictures] }];
}

function wireMessage(m: ChatMessage): Record<string, unknown> {
  return {
    role: m.role,
    content: m.content,
    ...(m.toolCalls?.length
      ? {
          tool_calls: m.toolCalls.map((c, i) => ({
            id: c.id ?? `call_${i}`,
            type: 'function',
            function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments ?? {}) },
          })),
        }
      : {}),
    ...(m.toolCallId !== undefined ? { tool_call_id: m.toolCallId } : {}),
  };
}

export class HttpPolicy implements Policy {
  private readonly options: z.infer<typeof HttpPolicyOptions>;
  private readonly urls: string[];
  private current = 0;
  private readonly fetch: typeof fetch;

  constructor(options: HttpPolicyOptions) {
    this.options = HttpPolicyOptions.parse(options);
    this.urls = [this.options.baseUrl, ...this.options.fallbackUrls].map((u) => `${u.replace(/\/+$/, '')}/chat/completions`);
    const pins = this.options.pinnedCertificates;
    const plain = this.urls.find((u) => !u.startsWith('https:'));
    if (pins && plain) throw new Error(`a pinned certificate needs an https baseUrl, not ${plain.replace(/\/chat\/completions$/, '')}`);
    const unpinned = pins && this.urls.map((u) => new URL(u).origin).find((o) => !pins[o]);
    if (unpinned) throw new Error(`no pinned certificate for ${unpinned}: every server of a pinned policy needs its own`);
    const outbound = this.options.outbound;
    if (pins && outbound) throw new Error('a policy is either pinned to our trainer boxes or an outbound call to an endpoint that is not ours, not both');
    this.fetch = pins ? pinnedFetchByOrigin(pins) : outbound ? outboundFetch(outbound, { timeoutMs: this.options.timeoutMs, maxResponseBytes: EXTERNAL_MAX_RESPONSE_BYTES }) : fetch;
  }

  /** A server's body, in an error only when the server is ours: an external one's never reaches a record. */
  private shown(text: string, max: number): string {
    return this.options.outbound ? '' : `: ${text.slice(0, max)}`;
  }

  /** The server this episode talks to now. */
  get url(): string {
    return this.urls[this.current];
  }

  /**
   * The client an EpisodeRequest describes: its endpoint, its generation options and its seed. The
   * bearer token is read from the environment variable the endpoint names (never sent in events).
   */
  static fromEndpoint(
    endpoint: PolicyEndpoint,
    generation: GenerationOptions,
    seed: number,
    extra: Partial<Pick<HttpPolicyOptions, 'timeoutMs' | 'retries' | 'backoffBaseMs' | 'backoffMaxMs' | 'retryAfterMaxMs'>> = {},
    env: Record<string, string | undefined> = process.env,
  ): HttpPolicy {
    const token = endpoint.tokenEnv ? env[endpoint.tokenEnv] : undefined;
    if (endpoint.tokenEnv && !token) throw new Error(`environment variable ${endpoint.tokenEnv} (the policy endpoint's token) is not set`);
    return new HttpPolicy({
      baseUrl: endpoint.baseUrl,
      model: endpoint.model,
      ...(token ? { token } : {}),
      ...(endpoint.fallbackUrls ? { fallbackUrls: endpoint.fallbackUrls } : {}),
      temperature: generation.temperature,
      topP: generation.topP,
      topK: generation.topK,
      maxTokens: generation.maxTokens,
      seed,
      ...extra,
    });
  }

  async act(messages: ChatMessage[], context: PolicyContext): Promise<PolicyReply> {
    const started = performance.now();
    const o = this.options;
    const body = JSON.stringify({
      model: o.model,
      messages: messages.flatMap(wireMessages),
      temperature: o.temperature,
      top_p: o.topP,
      max_tokens: o.maxTokens,
      ...(o.topK > 0 ? { top_k: o.topK } : {}),
      ...(o.seed !== undefined ? { seed: deriveSeed(o.seed, context.step) } : {}),
      ...(context.tools?.length ? { tools: context.tools.map((t) => ({ type: 'function', function: t })) } : {}),
      ...(context.constraint && o.guidedDecoding ? guidedFields(context.constraint) : {}),
      ...(context.tools?.length && !context.constraint && o.guidedDecoding ? { tool_choice: 'required' } : {}),
    });
    let last: Retryable | null = null;
    let attempts = 0;
    let failures = 0;
    let queueFullWaitedMs = 0;
    for (;;) {
      if (last) {
        // A full queue (429) is the server pacing its clients, not a failure: it is retried within
        // queueFullBudgetMs without using up `retries`, and the Retry-After gets up to half again as
        // jitter so the clients it turned away do not all come back in the same instant.
        const paced = last.status === 429 && queueFullWaitedMs < o.queueFullBudgetMs;
        if (!paced && ++failures > o.retries) break;
        const asked = last.retryAfterMs !== null ? Math.min(last.retryAfterMs, o.retryAfterMaxMs) : null;
        const wait = asked !== null ? asked * (1 + Math.random() / 2) : backoffMs(failures - 1, o.backoffBaseMs, o.backoffMaxMs);
        if (last.status === 429) queueFullWaitedMs += wait;
        await sleep(wait, context.signal);
      }
      attempts++;
      try {
        const completion = await this.request(body, attempts, context.signal);
        const message = completion.choices[0].message;
        const toolCalls: ToolCall[] = (message.tool_calls ?? []).map((c) => ({
          ...(c.id ? { id: c.id } : {}),
          name: c.function.name,
          arguments: parseToolArguments(c.function.arguments),
        }));
        return {
          text: message.content ?? '',
          ...(toolCalls.length ? { toolCalls } : {}),
          tokens: tokensOf(completion.usage),
          // Wall time of the call, back-off included: what the episode actually waited for its action.
          inferenceMs: performance.now() - started,
        };
      } catch (err) {
        if (!(err instanceof Retryable)) throw err;
        last = err;
        // A server that is gone or failing hands the episode on; a full queue (429) is only pacing.
        if (err.status !== 429) this.current = (this.current + 1) % this.urls.length;
      }
    }
    throw new PolicyHttpError(`${this.url}: ${last?.message ?? 'failed'} (gave up after ${attempts} attempts)`, last?.status ?? null, attempts);
  }

  /** One attempt: the parsed completion, or Retryable / a final error. */
  private async request(body: string, attempts: number, signal?: AbortSignal): Promise<z.infer<typeof ChatCompletion>> {
    const timeout = AbortSignal.timeout(this.options.timeoutMs);
    let response: Response;
    try {
      response = await this.fetch(this.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(this.options.token ? { authorization: `Bearer ${this.options.token}` } : {}) },
        body,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (err) {
      // The caller's abort is final, and so is a server that is not the pinned one; a timeout or a refused connection is worth another try.
      if (signal?.aborted) throw signal.reason;
      if ((err as Error).cause instanceof PinMismatchError) throw new PolicyHttpError(`${this.url}: ${((err as Error).cause as Error).message}`, null, attempts);
      // Refused before or instead of an answer (address, scheme, redirect, size): another try would be refused the same way.
      if (err instanceof OutboundError && err.reason !== 'network' && err.reason !== 'timeout') throw new PolicyHttpError(`${this.url}: ${err.message}`, null, attempts);
      const why = timeout.aborted ? `timed out after ${this.options.timeoutMs} ms` : `network error: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`;
      throw new Retryable(why, null, null);
    }
    let text: string;
    try {
      text = await response.text();
    } catch (err) {
      if (err instanceof OutboundError && err.reason === 'too-large') throw new PolicyHttpError(`${this.url}: ${err.message}`, response.status, attempts);
      text = '';
    }
    if (response.status === 409) throw new IterationClosedError(this.options.outbound ? '' : text.slice(0, 500));
    if (response.status === 429 || response.status >= 500) {
      throw new Retryable(`HTTP ${response.status}${this.shown(text, 300)}`, response.status, parseRetryAfter(response.headers.get('retry-after')));
    }
    if (!response.ok) throw new PolicyHttpError(`${this.url}: HTTP ${response.status}${this.shown(text, 500)}`, response.status, attempts);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new PolicyHttpError(`${this.url}: the response is not JSON${this.shown(text, 200)}`, response.status, attempts);
    }
    const parsed = ChatCompletion.safeParse(json);
    if (!parsed.success) throw new PolicyHttpError(`${this.url}: not a chat completion${this.options.outbound ? '' : `: ${z.prettifyError(parsed.error)}`}`, response.status, attempts);
    return parsed.data;
  }
}
