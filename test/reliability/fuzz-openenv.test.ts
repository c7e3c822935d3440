/**
 * Fuzz the OpenEnv protocol (environments/openenv/): a hostile server on loopback answers `GET /schema`,
 * `POST /reset`, `POST /step` and the `/ws` session with fuzzed bodies — random JSON, near-valid
 * observations, rewards, `done` and schemas (helpers/fuzz-bodies.ts), garbage, bodies past
 * `maxResponseBytes` (whole, declared by content-length, or streamed without end), wrong statuses and
 * content types, binary, unasked-for and fragmented /ws messages, hang-ups, silence and slow answers.
 * Every episode ends within its time limit with a finite reward; a failed one names a fixed reason (the
 * list below) that never carries the server's bytes; a body streamed without end is cut at the cap.
 *
 * `FUZZ_RUNS=N` runs more (docs/RELIABILITY.md); `FUZZ_SEED` and `FUZZ_PATH` replay a failure fast-check reports.
 */
import fc from 'fast-check';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import type { EnvironmentContext } from '../../environments/environment.ts';
import { runEpisode } from '../../environments/episode-runner.ts';
import { openenv } from '../../environments/openenv/definition.ts';
import type { Policy, PolicyReply } from '../../shared/ports/policy.ts';
import { bodyText, fuzzBody, type Json } from './helpers/fuzz-bodies.ts';

/** CI runs the same cases every time (a random seed made the suite flaky); FUZZ_SEED explores others. */
const FIXED_SEED = 20261206;

const EMBEDDED: EnvironmentContext = { outbound: { allow: ['loopback'] }, allowCommands: false };
const MAX_BYTES = 16_384;
const CALL_MS = 300;
const EPISODE_MS = 2_500;
const none = { tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 };

/** Every reason an OpenEnv episode may fail with: fixed sentences, naming at most a status, a path or a code. */
const WHAT = String.raw`(/schema|/reset|/step|reset|step)`;
const OUTBOUND = String.raw`(no complete answer within \d+ ms|the response passed \d+ bytes|the server answered \d+ \(a redirect\); redirects are not followed|could not reach http://127\.0\.0\.1:\d+( \([A-Z_]+\))?|the connection failed while reading the response)`;
const FIXED_REASONS = new RegExp(
  '^(' +
    [
      String.raw`the server's ${WHAT} answer is not JSON`,
      String.raw`the server's ${WHAT} answer is not \{observation: object, reward: finite number\|null, done: boolean\}`,
      String.raw`the server's reward is beyond ±1000000`,
      String.raw`the episode ran past its time limit \(episodeTimeoutMs\)`,
      String.raw`the server answered HTTP \d+ to (GET|POST) ${WHAT}`,
      String.raw`(GET|POST) ${WHAT}: ${OUTBOUND}`,
      String.raw`the server's /schema answer has no "action" JSON Schema object`,
      String.raw`the server's /schema action JSON Schema nests deeper than 64 levels`,
      String.raw`the server's ${WHAT} observation nests deeper than 64 levels`,
      String.raw`a /ws message passed \d+ bytes \(maxResponseBytes\)`,
      String.raw`/ws: could not reach ws://127\.0\.0\.1:\d+ or the connection failed( \([A-Z_]+\))?`,
      String.raw`the server answered HTTP \d+ to the /ws upgrade( \(a redirect; redirects are not followed\))?`,
      String.raw`the server closed the /ws session`,
      String.raw`the /ws connection did not open in time`,
      String.raw`the server did not answer ${WHAT} within \d+ ms`,
      String.raw`the server's ${WHAT} answer is not an OpenEnv /ws message \(\{type: "observation"\|"error", data\}\)`,
      String.raw`the server answered an error to ${WHAT} \(([A-Z_]{1,64}|no code)\)`,
      String.raw`the server sent a /ws message nobody asked for`,
      String.raw`the server sent a binary /ws message; OpenEnv speaks JSON text`,
      String.raw`the session is closed`,
      String.raw`the server ended the episode at reset \(done: true before any action\)`,
    ].join('|') +
    ')$',
);

/** How one answer is delivered. */
type Delivery = 'whole' | 'trickle' | 'endless' | 'declared-huge' | 'hang-up' | 'silence' | 'binary' | 'twice' | 'fragments';
interface Reply {
  status: number;
  type: string | null;
  body: string;
  delayMs: number;
  delivery: Delivery;
}

const VALID_SCHEMA: Json = {
  action: { type: 'object', properties: { x: { type: 'integer', minimum: 0, maximum: 9 }, word: { type: 'string', enum: ['a', 'b'] }, metadata: { type: 'object' } }, required: ['x'] },
  observation: { type: 'object', properties: { text: { type: 'string' } } },
};
const validPayload = (done: boolean, reward: Json = 0.5): Json => ({ observation: { text: 'hello', n: [1, 2], metadata: { k: 'v' } }, reward, done });

/** Bodies no mutation reaches: nesting past any stack, sizes on both sides of the cap, edge rewards. */
/** Nesting that fits in MAX_BYTES and still overflows a recursive walk (3,000 arrays did, before the depth check). */
const special: fc.Arbitrary<string> = fc.constantFrom(
  `{"action":${'{"anyOf":['.repeat(1_200)}{}${']}'.repeat(1_200)}}`,
  `{"action":{"type":"object","properties":{"x":${'{"type":"array","items":'.repeat(600)}{}${'}'.repeat(600)}}}}`,
  `{"observation":{"a":${'['.repeat(6_000)}${']'.repeat(6_000)}},"reward":1,"done":false}`,
  `{"observation":{"a":${'{"b":'.repeat(2_500)}1${'}'.repeat(2_500)}},"reward":1,"done":false}`,
  JSON.stringify({ observation: { text: 'y'.repeat(MAX_BYTES - 200) }, reward: 1, done: false }),
  JSON.stringify({ observation: { text: 'LEAKED-BODY'.repeat(MAX_BYTES / 5) }, reward: 1, done: false }),
  JSON.stringify({ action: { type: 'object', properties: { x: { type: 'integer', minimum: 1e308, maximum: -1e308 } } } }),
  JSON.stringify({ action: { type: 'object', properties: { x: { type: 'number', minimum: -1e308, maximum: 1e308 } } } }),
  JSON.stringify({ action: { type: 'object', properties: { x: { enum: [] }, y: { anyOf: [] }, z: { type: 'integer', minimum: 0.5, maximum: 0.6 } } } }),
  JSON.stringify({ action: { type: 'object', properties: { __proto__: { type: 'integer' }, constructor: { type: 'string' } } } }).replace('"constructor"', '"__proto__"'),
  '{"observation":{"__proto__":{"polluted":true},"toString":1},"reward":1,"done":false}',
  JSON.stringify({ observation: {}, reward: 1e6, done: true }),
  JSON.stringify({ observation: {}, reward: -1e6 - 1, done: true }),
  '{"observation":{},"reward":1e999,"done":false}',
  '{"observation":{},"reward":"NaN","done":false}',
  JSON.stringify({ observation: { x: 1 }, reward: true, done: 'yes' }),
);

const delay = fc.oneof({ weight: 12, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.integer({ min: 20, max: 150 }) }, { weight: 1, arbitrary: fc.constant(CALL_MS + 200) });
const status = fc.oneof({ weight: 12, arbitrary: fc.constant(200) }, { weight: 3, arbitrary: fc.constantFrom(201, 204, 302, 400, 404, 422, 500, 503) });
const contentType = fc.oneof({ weight: 6, arbitrary: fc.constant('application/json') }, { weight: 2, arbitrary: fc.constantFrom(null, 'text/html', 'application/octet-stream', 'text/event-stream', 'application/json; charset=latin1') });
const delivery = fc.oneof(
  { weight: 16, arbitrary: fc.constant<Delivery>('whole') },
  { weight: 4, arbitrary: fc.constantFrom<Delivery>('trickle', 'endless', 'declared-huge', 'hang-up', 'silence', 'binary', 'twice', 'fragments') },
);

function reply(body: fc.Arbitrary<string>): fc.Arbitrary<Reply> {
  return fc.record({ status, type: contentType, body, delayMs: delay, delivery });
}

/** A /reset or /step payload; over /ws wrapped as OpenEnv's message most of the time. */
function answerBody(ws: boolean): fc.Arbitrary<string> {
  const payload = fc.oneof(
    { weight: 4, arbitrary: fc.boolean().map((done) => JSON.stringify(validPayload(done))) },
    { weight: 6, arbitrary: fuzzBody(validPayload(false)).map(bodyText) },
    { weight: 2, arbitrary: special },
  );
  if (!ws) return payload;
  const wrap = (text: string) => {
    try {
      return JSON.stringify({ type: 'observation', data: JSON.parse(text) as Json });
    } catch {
      return text;
    }
  };
  return fc.oneof(
    { weight: 6, arbitrary: payload.map(wrap) },
    { weight: 2, arbitrary: fuzzBody({ type: 'observation', data: validPayload(false) }).map(bodyText) },
    { weight: 1, arbitrary: fuzzBody({ type: 'error', data: { message: 'LEAKED-BODY secret', code: 'EXECUTION_ERROR' } }).map(bodyText) },
    { weight: 1, arbitrary: special },
  );
}

const schemaBody = fc.oneof(
  { weight: 6, arbitrary: fc.constant(JSON.stringify(VALID_SCHEMA)) },
  { weight: 3, arbitrary: fuzzBody(VALID_SCHEMA).map(bodyText) },
  { weight: 1, arbitrary: special },
);

/** One episode's script: the transport, the action mapping, the schema's answer and the answers that follow. */
const script = fc.record({
  transport: fc.constantFrom<'ws' | 'http'>('ws', 'http'),
  as: fc.constantFrom('tool', 'json', 'text'),
  horizon: fc.integer({ min: 1, max: 4 }),
  policy: fc.constantFrom('random', 'scripted'),
  schema: fc.oneof({ weight: 4, arbitrary: reply(schemaBody).map((r) => ({ ...r, status: 200, delivery: 'whole' as Delivery, delayMs: 0 })) }, { weight: 1, arbitrary: reply(schemaBody) }),
});
type Script = { transport: 'ws' | 'http'; as: string; horizon: number; policy: string; schema: Reply; answers: Reply[] };
/** The reset answer is valid most of the time, so the steps after it are fuzzed as often as the reset. */
const scripts: fc.Arbitrary<Script> = script.chain((s) => {
  const ws = s.transport === 'ws';
  const valid = JSON.stringify(ws ? { type: 'observation', data: validPayload(false) } : validPayload(false));
  const first = fc.oneof({ weight: 3, arbitrary: reply(fc.constant(valid)).map((r) => ({ ...r, status: 200, delivery: 'whole' as Delivery })) }, { weight: 2, arbitrary: reply(answerBody(ws)) });
  return fc.tuple(first, fc.array(reply(answerBody(ws)), { minLength: 0, maxLength: 4 })).map(([reset, steps]) => ({ ...s, answers: [reset, ...steps] }));
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function endless(write: (chunk: Buffer) => boolean, onDrain: (f: () => void) => void, gone: () => boolean): void {
  const chunk = Buffer.alloc(8_192, 0x78);
  const pump = () => {
    while (!gone() && write(chunk));
    if (!gone()) onDrain(pump);
  };
  pump();
}

async function sendHttp(req: IncomingMessage, res: ServerResponse, r: Reply): Promise<void> {
  if (r.delayMs) await sleep(r.delayMs);
  if (res.destroyed) return;
  const headers: Record<string, string> = r.type ? { 'content-type': r.type } : {};
  if (r.status === 302) headers.location = 'http://169.254.169.254/latest/meta-data/';
  switch (r.delivery) {
    case 'silence':
      return;
    case 'hang-up':
      req.socket.destroy();
      return;
    case 'endless':
      res.writeHead(200, headers);
      return endless((c) => res.write(c), (f) => res.once('drain', f), () => res.destroyed);
    case 'declared-huge':
      res.writeHead(200, { ...headers, 'content-length': String(MAX_BYTES * 100) });
      res.write(r.body.slice(0, 100));
      return;
    case 'trickle': {
      res.writeHead(r.status, headers);
      const third = Math.ceil(r.body.length / 3);
      for (let i = 0; i < 3 && !res.destroyed; i++) {
        res.write(r.body.slice(i * third, (i + 1) * third));
        await sleep(30);
      }
      res.end();
      return;
    }
    default:
      res.writeHead(r.status, headers).end(r.body);
  }
}

async function sendWs(socket: WebSocket, r: Reply): Promise<void> {
  if (r.delayMs) await sleep(r.delayMs);
  if (socket.readyState !== socket.OPEN) return;
  switch (r.delivery) {
    case 'silence':
      return;
    case 'hang-up':
      socket.terminate();
      return;
    case 'binary':
      socket.send(Buffer.from(r.body), { binary: true });
      return;
    case 'twice':
      socket.send(r.body);
      socket.send(r.body);
      return;
    case 'endless':
    case 'fragments': {
      // One message that never ends, 8 KiB a fragment: its total must be capped, not each frame.
      const chunk = Buffer.alloc(8_192, 0x78);
      const more = () => {
        if (socket.readyState !== socket.OPEN) return;
        socket.send(chunk, { fin: false, binary: false }, () => setImmediate(more));
      };
      more();
      return;
    }
    case 'declared-huge':
      socket.send('x'.repeat(MAX_BYTES * 2));
      return;
    case 'trickle':
      await sleep(60);
      if (socket.readyState === socket.OPEN) socket.send(r.body);
      return;
    default:
      socket.send(r.body);
  }
}

/** A scripted model: a tool call, a JSON object in text, or words, whichever the mapping wants. */
function scripted(as: string): Policy {
  return {
    async act(): Promise<PolicyReply> {
      if (as === 'tool') return { text: '', toolCalls: [{ name: 'act', arguments: { x: 3 } }], ...none };
      return { text: as === 'json' ? 'here: {"x": 3}' : 'go north', ...none };
    },
  };
}

describe('fuzz the OpenEnv protocol: a hostile server', () => {
  let server: Server;
  let url = '';
  let current: Script | undefined;
  let next = 0;
  const served: Reply[] = [];
  const take = (): Reply => current!.answers[next++] ?? { status: 200, type: 'application/json', body: JSON.stringify(validPayload(true)), delayMs: 0, delivery: 'whole' };

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (!current) return res.writeHead(500).end();
        const r = req.url === '/schema' ? current.schema : take();
        served.push(r);
        void sendHttp(req, res, r);
      });
    });
    const wss = new WebSocketServer({ server, maxPayload: 1 << 20 });
    wss.on('connection', (socket) => {
      socket.on('error', () => undefined);
      socket.on('message', (data) => {
        const type = (() => {
          try {
            return (JSON.parse(String(data)) as { type?: string }).type;
          } catch {
            return undefined;
          }
        })();
        if (type !== 'reset' && type !== 'step') return;
        const r = take();
        served.push(r);
        void sendWs(socket, r);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });

  it('ends every episode in bounded time with a finite reward, or a fixed reason that never carries the body', async () => {
    const reasons = new Map<string, number>();
    let clean = 0;
    await fc.assert(
      fc.asyncProperty(scripts, async (s) => {
        current = s;
        next = 0;
        served.length = 0;
        const options = {
          url,
          transport: s.transport,
          horizon: s.horizon,
          action: s.as === 'text' ? { as: 'text', field: 'message' } : { as: s.as },
          callTimeoutMs: CALL_MS,
          episodeTimeoutMs: EPISODE_MS,
          maxResponseBytes: MAX_BYTES,
        };
        const parsed = openenv.optionsSchema.parse(options);
        const policy = s.policy === 'random' ? openenv.random({ seed: 1 }, parsed, 7) : scripted(s.as);
        const started = Date.now();
        let hung: NodeJS.Timeout | undefined;
        const result = await Promise.race([
          runEpisode({ definition: openenv, task: { seed: 1 }, options, policy, seed: 0, context: EMBEDDED }),
          new Promise<never>((_, reject) => {
            hung = setTimeout(() => reject(new Error('the episode did not end within its time limit')), EPISODE_MS + 2_000);
          }),
        ]).finally(() => clearTimeout(hung));
        expect(Date.now() - started).toBeLessThan(EPISODE_MS + 2_000);
        expect(Number.isFinite(result.reward)).toBe(true);
        expect(Math.abs(result.reward)).toBeLessThanOrEqual(1e6);
        if (result.error === null) {
          clean++;
          expect(['done', 'horizon']).toContain(result.stopReason);
          return;
        }
        expect(result.stopReason).toBe('error');
        expect(result.error).toMatch(FIXED_REASONS);
        expect(result.error).not.toMatch(/LEAKED-BODY|secret|xxxxxxxx/);
        // A body without end is cut at the cap (or, on a machine too busy to read 16 KiB in time, at the call limit).
        if (served.at(-1)?.delivery === 'endless') expect(result.error).toMatch(/passed \d+ bytes|did not answer|no complete answer/);
        const reason = result.error.replace(/\d+/g, 'N');
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 150), ...(process.env.FUZZ_SEED ? { seed: Number(process.env.FUZZ_SEED), path: process.env.FUZZ_PATH, endOnFailure: true } : { seed: FIXED_SEED }) },
    );
    if (process.env.FUZZ_LOG) console.log(clean, [...reasons].sort((a, b) => b[1] - a[1]));
    expect(clean).toBeGreaterThan(10);
    expect(reasons.size).toBeGreaterThan(8);
  }, 60_000 + 150 * Number(process.env.FUZZ_RUNS ?? 0));
});
