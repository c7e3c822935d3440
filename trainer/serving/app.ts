/**
 * The OpenAI-compatible HTTP API of the trainer (hono): chat completions for `base` and every member of the
 * live iteration, `/v1/models`, `/healthz` and Prometheus `/metrics`. Bearer auth when a token is given.
 * `/v1/rollouts` issues rollout keys (rollout-keys.ts): a key opens chat completions of its one model and
 * nothing else, whatever model the request names, and the server counts what it served.
 */
import { randomUUID } from 'node:crypto';
import { bearerToken, tokenMatches } from '../../shared/bearer-token.ts';
import { Hono, type Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import type { ActionConstraint } from '../../shared/ports/policy.ts';
import type { GenerateResult, GenerateRow } from '../engine/engine.ts';
import { compileConstraint, ConstraintError } from '../engine/generation/regex-automaton.ts';
import { QueueFullError, RequestAbortedError, StaleMemberError } from './batcher.ts';
import { BASE_MODEL, memberModelName, resolveModel } from './model-name.ts';
import { ChatTemplateError } from '../engine/model/chat-tokenizer.ts';
import type { ToolFormat } from '../engine/model/tool-format.ts';
import { ChatCompletionRequest, type ChatCompletion, type ChatCompletionChunk, type ErrorBody } from './openai-schema.ts';
import type { InferenceService } from './service.ts';
import { TextFeed } from './text-feed.ts';
import { planTools, readToolCalls, toChatMessages, type ToolReply } from './tool-calls.ts';
import { ToolCallHold } from './tool-stream.ts';
import { isRolloutKey, RolloutKeys, type RolloutUsage } from './rollout-keys.ts';

export interface AppOptions {
  /** When set, every route but /healthz needs `Authorization: Bearer <token>`. */
  token?: string;
  /** Per-request limit from arrival to the last token. */
  requestTimeoutMs: number;
  /** Completion budget when the request names none. */
  defaultMaxTokens: number;
  /**
   * What a prompt longer than the context gets: 400 (OpenAI's behaviour), or passed on for the engine to
   * drop its oldest tokens — only right when the engine was built with contextPolicy 'truncate-left'.
   */
  contextPolicy: 'error' | 'truncate-left';
  /** The longest a rollout key may live (an episode's deadline is shorter). */
  rolloutKeyMaxMs?: number;
}

const RolloutKeyRequest = z.object({ model: z.string().min(1).max(200), expiresInMs: z.number().int().min(1_000) }).strict();

function errorBody(message: string, type: string, code: string | null = null, param: string | null = null): ErrorBody {
  return { error: { message, type, param, code } };
}


function zodPaths(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(body)'}: ${i.message}`).join('; ');
}

export function createInferenceApp(service: InferenceService, options: AppOptions): Hono {
  const app = new Hono();
  const { engine, metrics, batcher } = service;
  const fingerprint = `esopt-${engine.mode}`;

  app.get('/healthz', (c) => c.json({ ok: true, mode: engine.mode, liveIteration: service.population?.iteration ?? null, queueDepth: batcher.depth }));

  const rollouts = new RolloutKeys();
  /** The rollout key a request came with, once checked. */
  const rolloutOf = new WeakMap<Request, RolloutUsage & { id: string }>();
  app.use('*', async (c, next) => {
    const given = bearerToken(c.req.header('authorization'));
    if (given !== null && isRolloutKey(given)) {
      const entry = rollouts.resolve(given);
      if (!entry) return c.json(errorBody('unknown, expired or revoked rollout key', 'invalid_request_error', 'invalid_api_key'), 401, { 'WWW-Authenticate': 'Bearer' });
      const allowed = (c.req.method === 'POST' && c.req.path === '/v1/chat/completions') || (c.req.method === 'GET' && c.req.path === '/v1/models');
      if (!allowed) return c.json(errorBody('a rollout key opens chat completions of its model only', 'invalid_request_error', 'forbidden'), 403);
      rolloutOf.set(c.req.raw, entry);
      return next();
    }
    if (options.token !== undefined && (given === null || !tokenMatches(given, options.token))) {
      return c.json(errorBody('missing or wrong bearer token (Authorization: Bearer <ESOPT_TOKEN>)', 'invalid_request_error', 'invalid_api_key'), 401, {
        'WWW-Authenticate': 'Bearer',
      });
    }
    await next();
  });

  const keyMaxMs = options.rolloutKeyMaxMs ?? 3_600_000;
  app.post('/v1/rollouts', async (c) => {
    const parsed = RolloutKeyRequest.safeParse(await c.req.json().catch(() => undefined));
    if (!parsed.success) return c.json(errorBody(`invalid request: ${zodPaths(parsed.error)}`, 'invalid_request_error', 'invalid_request'), 400);
    const resolved = resolveModel(parsed.data.model, service.population, service.newest);
    if (!resolved.ok) return c.json(errorBody(resolved.message, 'invalid_request_error', 'model_not_found', 'model'), resolved.status);
    const expiresAt = Date.now() + Math.min(parsed.data.expiresInMs, keyMaxMs);
    const { id, key } = rollouts.issue(parsed.data.model, expiresAt);
    return c.json({ id, key, model: parsed.data.model, expiresAt: new Date(expiresAt).toISOString() }, 201);
  });
  app.get('/v1/rollouts/:id', (c) => {
    const usage = rollouts.usage(c.req.param('id'));
    if (!usage) return c.json(errorBody('no such rollout key', 'invalid_request_error', 'not_found'), 404);
    return c.json({ id: c.req.param('id'), model: usage.model, calls: usage.calls, promptTokens: usage.promptTokens, completionTokens: usage.completionTokens, expiresAt: new Date(usage.expiresAt).toISOString() });
  });
  app.delete('/v1/rollouts/:id', (c) => (rollouts.revoke(c.req.param('id')) ? c.body(null, 204) : c.json(errorBody('no such rollout key', 'invalid_request_error', 'not_found'), 404)));

  app.get('/metrics', (c) => c.text(metrics.render(), 200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' }));

  app.get('/v1/models', (c) => {
    const created = Math.floor(Date.now() / 1000);
    const live = service.population;
    const rollout = rolloutOf.get(c.req.raw);
    const ids = rollout ? [rollout.model] : [BASE_MODEL, ...(live ? live.members.map((m) => memberModelName(live.iteration, m.index)) : [])];
    return c.json({ object: 'list', data: ids.map((id) => ({ id, object: 'model', created, owned_by: 'esopt' })) });
  });

  app.post('/v1/chat/completions', async (c) => {
    const arrived = performance.now();
    const record = (status: number): void => metrics.request(status, (performance.now() - arrived) / 1000);
    const finish = <R extends Response>(res: R): R => {
      record(res.status);
      return res;
    };
    const fail = (status: 400 | 404 | 409 | 429 | 499 | 500 | 503 | 504, body: ErrorBody, headers?: Record<string, string>): Response =>
      finish(c.json(body, status as 400, headers));

    let raw: unknown;
    try {
      raw = await c.req.json();
    } catch {
      return fail(400, errorBody('request body is not valid JSON', 'invalid_request_error'));
    }
    const parsed = ChatCompletionRequest.safeParse(raw);
    if (!parsed.success) {
      const first = parsed.error.issues[0]?.path.join('.') || null;
      return fail(400, errorBody(`invalid request: ${zodPaths(parsed.error)}`, 'invalid_request_error', 'invalid_request', first));
    }
    const rollout = rolloutOf.get(c.req.raw);
    // A rollout key decides the model: the agent's own model name (whatever its framework sends) is replaced.
    const req = rollout ? { ...parsed.data, model: rollout.model } : parsed.data;
    const resolved = resolveModel(req.model, service.population, service.newest);
    if (!resolved.ok) {
      const code = resolved.status === 404 ? 'model_not_found' : resolved.status === 503 ? 'iteration_not_started' : 'iteration_not_live';
      return fail(resolved.status, errorBody(resolved.message, 'invalid_request_error', code, 'model'));
    }

    const messages = toChatMessages(req);
    const tools = planTools(req, engine.toolFormat);
    // Tokenized once: the count checks the context here, and the ids are what the engine decodes from.
    let promptIds: number[];
    try {
      promptIds = engine.encodeChat(messages, tools.tools);
    } catch (err) {
      if (!(err instanceof ChatTemplateError)) throw err;
      return fail(400, errorBody(err.message, 'invalid_request_error', 'invalid_messages', 'messages'));
    }
    const promptTokens = promptIds.length;
    // Truncating engines keep the newest tokens, so only the completion budget has to fit.
    const room = options.contextPolicy === 'truncate-left' ? engine.contextLength - 1 : engine.contextLength - promptTokens;
    const asked = req.max_completion_tokens ?? req.max_tokens ?? null;
    if (room < 1 || (asked !== null && asked > room)) {
      return fail(
        400,
        errorBody(`the prompt has ${promptTokens} tokens; with max_tokens ${asked ?? 1} that exceeds the context of ${engine.contextLength}`, 'invalid_request_error', 'context_length_exceeded', 'messages'),
      );
    }
    const constraint: ActionConstraint | undefined =
      tools.constraint ?? (req.guided_regex != null ? { regex: req.guided_regex } : req.guided_choice != null ? { choice: req.guided_choice } : undefined);
    if (constraint) {
      // Compiled here, not in the batch: a pattern that does not compile fails its own request only.
      try {
        compileConstraint(constraint);
      } catch (err) {
        if (!(err instanceof ConstraintError)) throw err;
        const param = tools.constraint ? 'tool_choice' : 'regex' in constraint ? 'guided_regex' : 'guided_choice';
        return fail(400, errorBody(`${param}: ${err.message}`, 'invalid_request_error', 'invalid_constraint', param));
      }
    }
    const timeout = AbortSignal.timeout(options.requestTimeoutMs);
    // Aborted when a streaming client goes away mid-stream, whether or not the request's own signal says so.
    const streamClosed = new AbortController();
    const signal = AbortSignal.any([c.req.raw.signal, timeout, streamClosed.signal]);
    const feed = req.stream ? new TextFeed() : null;
    const row: GenerateRow = {
      promptIds,
      member: resolved.selector,
      sampling: { temperature: req.temperature, topP: req.top_p, topK: req.top_k, seed: req.seed ?? (Math.random() * 0x100000000) >>> 0 },
      maxNewTokens: asked ?? Math.min(options.defaultMaxTokens, room),
      stop: req.stop == null ? [] : typeof req.stop === 'string' ? [req.stop] : req.stop,
      ...(constraint ? { constraint } : {}),
      signal,
      ...(feed ? { onText: (delta: string) => feed.push(delta) } : {}),
    };

    function failure(err: unknown): Response {
      if (err instanceof QueueFullError) {
        return fail(429, errorBody(err.message, 'rate_limit_error', 'queue_full'), { 'Retry-After': String(err.retryAfterSeconds) });
      }
      if (err instanceof StaleMemberError) return fail(409, errorBody(err.message, 'invalid_request_error', 'iteration_not_live', 'model'));
      if (err instanceof RequestAbortedError) return abortResponse();
      return fail(500, generationFailed(err));
    }
    function abortResponse(): Response {
      if (timeout.aborted) return fail(504, timedOut(options.requestTimeoutMs));
      // The client went away; nobody reads this, but the status is what the metrics count.
      return fail(499, clientClosed());
    }

    let generation: Promise<GenerateResult>;
    try {
      generation = batcher.submit(row); // throws QueueFullError at once
    } catch (err) {
      return failure(err);
    }
    if (rollout) {
      generation.then(
        (r) => r.finishReason !== 'abort' && rollouts.record(rollout.id, r.promptTokens, r.completionTokens),
        () => undefined,
      );
    }
    const id = `chatcmpl-${randomUUID()}`;
    const created = Math.floor(Date.now() / 1000);
    const includeUsage = req.stream_options?.include_usage === true;
    const stream = (text: TextFeed): Response =>
      streamCompletion(c, {
        id, created, model: req.model, fingerprint, includeUsage, feed: text, generation, timeout, timeoutMs: options.requestTimeoutMs, streamClosed, record,
        toolFormat: tools.parse ? engine.toolFormat : null,
      });
    if (feed) {
      const settled = generation.then(
        () => undefined,
        () => undefined,
      );
      void settled.then(() => feed.close());
      // Commit to a 200 event stream once text flows: a request that fails before that (timed out or
      // cancelled in the queue, stale member, engine error) still gets its proper status.
      await Promise.race([feed.started, settled]);
      if (feed.hasStarted) return stream(feed);
    }

    let result: GenerateResult;
    try {
      result = await generation;
    } catch (err) {
      return failure(err);
    }
    if (result.finishReason === 'abort') return abortResponse();
    if (feed) return stream(feed);
    const calls = tools.parse ? readToolCalls(engine.toolFormat, result.text) : null;
    const message: ChatCompletion['choices'][number]['message'] = calls
      ? { role: 'assistant', content: calls.content, refusal: null, tool_calls: calls.toolCalls }
      : { role: 'assistant', content: result.text, refusal: null };
    const body: ChatCompletion = {
      id,
      object: 'chat.completion',
      created,
      model: req.model,
      system_fingerprint: fingerprint,
      choices: [{ index: 0, message, logprobs: null, finish_reason: calls ? 'tool_calls' : result.finishReason }],
      usage: usageOf(result),
    };
    return finish(c.json(body));
  });

  app.notFound((c) => c.json(errorBody(`no route ${c.req.method} ${c.req.path}`, 'invalid_request_error', 'not_found'), 404));
  app.onError((err, c) => c.json(errorBody(`internal error: ${err.message}`, 'server_error'), 500));
  return app;
}

/** OpenAI's usage; `cached_tokens` counts the prompt tokens the engine's prefix cache served. */
function usageOf(r: GenerateResult): ChatCompletion['usage'] {
  return { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens, prompt_tokens_details: { cached_tokens: r.cachedTokens } };
}

const timedOut = (ms: number): ErrorBody => errorBody(`request timed out after ${ms} ms`, 'timeout_error', 'timeout');
const clientClosed = (): ErrorBody => errorBody('client closed the request', 'invalid_request_error', 'client_closed');
const generationFailed = (err: unknown): ErrorBody => errorBody(`generation failed: ${(err as Error).message}`, 'server_error');

interface StreamParts {
  id: string;
  created: number;
  model: string;
  fingerprint: string;
  includeUsage: boolean;
  /** The completion's pieces as the engine decodes them; closed when `generation` settles. */
  feed: TextFeed;
  generation: Promise<GenerateResult>;
  timeout: AbortSignal;
  timeoutMs: number;
  /** Aborted here when the client disconnects, which cancels the row in the engine. */
  streamClosed: AbortController;
  /** Counts the request in the metrics once the stream has ended. */
  record: (status: number) => void;
  /** Set when the completion is read for tool calls in this format. */
  toolFormat: ToolFormat | null;
}

/**
 * OpenAI's stream: a role chunk, one content chunk per piece as the engine decodes it, a chunk carrying
 * finish_reason, then (with stream_options.include_usage) a usage chunk with no choices, then `[DONE]`. With
 * include_usage every chunk carries `usage: null` except the last, as OpenAI does. Once the 200 is sent a
 * failure can no longer change the status: a timeout or engine error mid-stream ends the stream with an
 * OpenAI-style `{"error": ...}` event and no `[DONE]`; the metrics count it as 504/500 (499 when the client left).
 */
function streamCompletion(c: Context, p: StreamParts): Response {
  const base = { id: p.id, object: 'chat.completion.chunk' as const, created: p.created, model: p.model, system_fingerprint: p.fingerprint };
  const withUsage = p.includeUsage ? { usage: null } : {};
  type Delta = ChatCompletionChunk['choices'][number]['delta'];
  const choice = (delta: Delta, finishReason: ChatCompletionChunk['choices'][number]['finish_reason']): ChatCompletionChunk => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...withUsage,
  });
  return streamSSE(c, async (stream) => {
    stream.onAbort(() => p.streamClosed.abort(new Error('client closed the stream')));
    const send = (data: unknown): Promise<void> => stream.writeSSE({ data: typeof data === 'string' ? data : JSON.stringify(data) });
    await send(choice({ role: 'assistant', content: '' }, null));
    const hold = p.toolFormat ? new ToolCallHold(p.toolFormat) : null;
    for await (const delta of p.feed) {
      if (stream.aborted) break;
      const content = hold ? hold.push(delta) : delta;
      if (content !== '') await send(choice({ content }, null));
    }
    const result = await p.generation.catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
    if (stream.aborted) return p.record(499);
    if (result instanceof Error || result.finishReason === 'abort') {
      const [status, body] = result instanceof Error ? [500, generationFailed(result)] : p.timeout.aborted ? [504, timedOut(p.timeoutMs)] : [499, clientClosed()];
      await send(body);
      return p.record(status);
    }
    const calls: ToolReply | null = hold && p.toolFormat ? readToolCalls(p.toolFormat, result.text) : null;
    if (calls) {
      // Words after the calls (rare) are content too; what came before them has been sent already.
      const after = hold!.held.replace(/<tool_call>[\s\S]*?(?:<\/tool_call>|$)/g, '').trim();
      if (p.toolFormat === 'hermes' && after !== '') await send(choice({ content: after }, null));
      for (const [index, call] of calls.toolCalls.entries()) {
        await send(choice({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] }, null));
        await send(choice({ tool_calls: [{ index, function: { arguments: call.function.arguments } }] }, null));
      }
    } else if (hold && hold.held !== '') await send(choice({ content: hold.held }, null));
    await send(choice({}, calls ? 'tool_calls' : result.finishReason));
    if (p.includeUsage) await send({ ...base, choices: [], usage: usageOf(result) } satisfies ChatCompletionChunk);
    await send('[DONE]');
    p.record(200);
  });
}
