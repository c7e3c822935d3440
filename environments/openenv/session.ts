/**
 * The wire to one OpenEnv server, for one episode. OpenEnv's HTTP `POST /reset` and `POST /step` build a fresh
 * environment for every request and close it after (openenv.core.env_server.http_server): they keep no episode,
 * so two steps of one episode — let alone two concurrent episodes — share nothing unless the server's factory
 * hands out one shared instance. The `/ws` WebSocket is OpenEnv's session: each connection gets an environment
 * of its own, so one connection per episode is what makes concurrent episodes of one server correct. `ws` is
 * the default transport; `http` is for servers known to keep one shared environment (one episode at a time).
 *
 * Every call is bounded: the connection goes only to an address the outbound policy allows (guardedLookup,
 * checkUrl), redirects are refused, a message or body past `maxResponseBytes` ends the episode, and each call
 * waits at most `min(callTimeoutMs, what is left of the episode)`. Errors are fixed sentences naming at most a
 * status or an OpenEnv error code: a server's text never reaches an error, a record or a log. The endpoint key
 * is sent as `Authorization: Bearer` on this server's own connections only.
 */
import WebSocket from 'ws';
import { z } from 'zod';
import { checkUrl, OutboundError, type OutboundPolicy } from '../outbound/address-policy.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../outbound/json-depth.ts';
import { guardedLookup, outboundFetch } from '../outbound/outbound-fetch.ts';

/** The most a reward may be in absolute value: beyond it a server is broken or hostile, not generous. */
export const MAX_ABS_REWARD = 1e6;

/** What /reset, /step and a ws `observation` message carry (OpenEnv's serialize_observation). */
const StepPayload = z.object({
  observation: z.record(z.string(), z.unknown()),
  reward: z.union([z.number().finite(), z.boolean()]).nullish(),
  done: z.boolean().default(false),
});
export interface ServerStep {
  observation: Record<string, unknown>;
  reward: number | null;
  done: boolean;
}

const WsAnswer = z.discriminatedUnion('type', [
  z.object({ type: z.literal('observation'), data: z.unknown() }),
  z.object({ type: z.literal('error'), data: z.object({ code: z.string().max(64).optional() }).loose() }),
]);

/** GET /schema: the JSON Schemas of the action, the observation and the state (only `action` is used). */
const SchemaAnswer = z.object({ action: z.record(z.string(), z.unknown()), observation: z.record(z.string(), z.unknown()).optional() }).loose();
export type ServerSchema = z.infer<typeof SchemaAnswer>;

/** Why an OpenEnv call failed; the message is fixed per reason. */
export class OpenEnvError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OpenEnvError';
  }
}

/** The server refused an action as invalid (OpenEnv's VALIDATION_ERROR, or HTTP 422): the model's fault, a wasted step. */
export class ActionRefused extends Error {}

export interface SessionLimits {
  callTimeoutMs: number;
  maxResponseBytes: number;
  /** Epoch milliseconds after which no call starts or continues. */
  episodeEnd: number;
}

export interface ServerSession {
  reset(data: Record<string, unknown>): Promise<ServerStep>;
  step(action: Record<string, unknown>): Promise<ServerStep>;
  close(): Promise<void>;
}

function payload(json: unknown, what: string): ServerStep {
  const r = StepPayload.safeParse(json);
  if (!r.success) throw new OpenEnvError(`the server's ${what} answer is not {observation: object, reward: finite number|null, done: boolean}`);
  if (nestsDeeperThan(r.data.observation)) throw new OpenEnvError(`the server's ${what} observation nests deeper than ${MAX_JSON_DEPTH} levels`);
  const reward = typeof r.data.reward === 'boolean' ? Number(r.data.reward) : (r.data.reward ?? null);
  if (reward !== null && Math.abs(reward) > MAX_ABS_REWARD) throw new OpenEnvError(`the server's reward is beyond ±${MAX_ABS_REWARD}`);
  return { observation: r.data.observation, reward, done: r.data.done };
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new OpenEnvError(`the server's ${what} answer is not JSON`);
  }
}

function timeLeft(limits: SessionLimits): number {
  const left = Math.min(limits.callTimeoutMs, limits.episodeEnd - Date.now());
  if (left <= 0) throw new OpenEnvError('the episode ran past its time limit (episodeTimeoutMs)');
  return left;
}

function authHeaders(key: string | undefined): Record<string, string> {
  return key ? { authorization: `Bearer ${key}` } : {};
}

function joinPath(base: URL, path: string, protocol?: string): URL {
  const url = new URL(base.href);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}${path}`;
  url.search = '';
  url.hash = '';
  if (protocol) url.protocol = protocol;
  return url;
}

async function httpCall(base: URL, path: string, init: { method: 'GET' | 'POST'; body?: unknown }, policy: OutboundPolicy, key: string | undefined, limits: SessionLimits): Promise<unknown> {
  const fetcher = outboundFetch(policy, { timeoutMs: timeLeft(limits), maxResponseBytes: limits.maxResponseBytes });
  try {
    const res = await fetcher(joinPath(base, path), {
      method: init.method,
      headers: { ...authHeaders(key), ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    });
    if (!res.ok) {
      await res.body?.cancel();
      if (res.status === 422 && path === '/step') throw new ActionRefused('the server refused the action as invalid (HTTP 422)');
      throw new OpenEnvError(`the server answered HTTP ${res.status} to ${init.method} ${path}`);
    }
    return parseJson(await res.text(), path);
  } catch (err) {
    if (err instanceof OutboundError) throw new OpenEnvError(`${init.method} ${path}: ${err.message}`);
    throw err;
  }
}

/**
 * GET /schema, retried (it is idempotent) twice after a network error, a timeout or a 5xx; each try has the
 * call limit and all stay within the episode's.
 */
export async function fetchSchema(base: URL, policy: OutboundPolicy, key: string | undefined, limits: SessionLimits): Promise<ServerSchema> {
  let last: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(200 * 2 ** attempt, Math.max(0, limits.episodeEnd - Date.now()))));
    try {
      const r = SchemaAnswer.safeParse(await httpCall(base, '/schema', { method: 'GET' }, policy, key, limits));
      if (!r.success) throw new OpenEnvError('the server\'s /schema answer has no "action" JSON Schema object');
      if (nestsDeeperThan(r.data.action)) throw new OpenEnvError(`the server's /schema action JSON Schema nests deeper than ${MAX_JSON_DEPTH} levels`);
      return r.data;
    } catch (err) {
      last = err;
      const transient = err instanceof OpenEnvError && /HTTP 5\d\d|could not reach|no complete answer|connection failed/.test(err.message);
      if (!transient || Date.now() >= limits.episodeEnd) throw err;
    }
  }
  throw last;
}

/** One episode over HTTP: OpenEnv's stateless /reset and /step (see the header for when that is right). */
export function httpSession(base: URL, policy: OutboundPolicy, key: string | undefined, limits: SessionLimits): ServerSession {
  return {
    async reset(data) {
      return payload(await httpCall(base, '/reset', { method: 'POST', body: data }, policy, key, limits), '/reset');
    },
    async step(action) {
      // Never retried: a step is not idempotent.
      return payload(await httpCall(base, '/step', { method: 'POST', body: { action } }, policy, key, limits), '/step');
    },
    async close() {},
  };
}

/** One episode over `/ws`: one connection, OpenEnv's `reset`/`step`/`close` messages, one answer per message. */
export async function wsSession(base: URL, policy: OutboundPolicy, key: string | undefined, limits: SessionLimits): Promise<ServerSession> {
  const url = joinPath(base, '/ws', base.protocol === 'https:' ? 'wss:' : 'ws:');
  try {
    checkUrl(url, policy);
  } catch (err) {
    throw new OpenEnvError(`/ws: ${(err as Error).message}`);
  }
  const socket = new WebSocket(url, {
    lookup: guardedLookup(policy),
    headers: authHeaders(key),
    handshakeTimeout: timeLeft(limits),
    maxPayload: limits.maxResponseBytes,
    followRedirects: false,
    perMessageDeflate: false,
  });
  // Answers arrive in order, one per message sent; a failure settles whoever waits and every later call.
  let failure: OpenEnvError | null = null;
  let waiting: { resolve: (text: string) => void; reject: (err: Error) => void } | null = null;
  const fail = (err: OpenEnvError) => {
    failure ??= err;
    waiting?.reject(failure);
    waiting = null;
    socket.terminate();
  };
  socket.on('message', (data, isBinary) => {
    if (!waiting) return fail(new OpenEnvError('the server sent a /ws message nobody asked for'));
    // Checked while the caller still waits, so the failure settles it (a call left waiting is a hung episode).
    if (isBinary) return fail(new OpenEnvError('the server sent a binary /ws message; OpenEnv speaks JSON text'));
    const w = waiting;
    waiting = null;
    w.resolve(Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8'));
  });
  socket.on('error', (err: Error & { code?: string }) => {
    if (err instanceof OutboundError) return fail(new OpenEnvError(`/ws: ${err.message}`));
    if (err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') return fail(new OpenEnvError(`a /ws message passed ${limits.maxResponseBytes} bytes (maxResponseBytes)`));
    fail(new OpenEnvError(`/ws: could not reach ${url.origin} or the connection failed${err.code ? ` (${err.code})` : ''}`));
  });
  socket.on('unexpected-response', (_req, res) => {
    res.resume();
    fail(new OpenEnvError(`the server answered HTTP ${res.statusCode} to the /ws upgrade${(res.statusCode ?? 0) >= 300 && (res.statusCode ?? 0) < 400 ? ' (a redirect; redirects are not followed)' : ''}`));
  });
  socket.on('close', () => fail(new OpenEnvError('the server closed the /ws session')));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => fail(new OpenEnvError('the /ws connection did not open in time')), timeLeft(limits));
    socket.once('open', () => {
      clearTimeout(timer);
      resolve();
    });
    waiting = {
      resolve: () => undefined,
      reject: (err) => {
        clearTimeout(timer);
        reject(err);
      },
    };
  });
  waiting = null;

  const call = (message: object, what: string): Promise<ServerStep> => {
    if (failure) return Promise.reject(failure);
    const ms = timeLeft(limits);
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => fail(new OpenEnvError(`the server did not answer ${what} within ${ms} ms`)), ms);
      waiting = {
        resolve: (t) => {
          clearTimeout(timer);
          resolve(t);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      socket.send(JSON.stringify(message));
    }).then((text) => {
      const answer = WsAnswer.safeParse(parseJson(text, what));
      if (!answer.success) throw new OpenEnvError(`the server's ${what} answer is not an OpenEnv /ws message ({type: "observation"|"error", data})`);
      if (answer.data.type === 'error') {
        const code = /^[A-Z_]{1,64}$/.test(answer.data.data.code ?? '') ? answer.data.data.code : 'no code';
        if (what === 'step' && code === 'VALIDATION_ERROR') throw new ActionRefused('the server refused the action as invalid (VALIDATION_ERROR)');
        throw new OpenEnvError(`the server answered an error to ${what} (${code})`);
      }
      return payload(answer.data.data, what);
    });
  };
  return {
    reset: (data) => call({ type: 'reset', data }, 'reset'),
    step: (action) => call({ type: 'step', data: action }, 'step'),
    async close() {
      if (socket.readyState === WebSocket.OPEN) {
        failure ??= new OpenEnvError('the session is closed');
        socket.send(JSON.stringify({ type: 'close' }), () => socket.close());
        setTimeout(() => socket.terminate(), 1000).unref();
      } else socket.terminate();
    },
  };
}
