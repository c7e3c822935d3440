/**
 * Fuzz MCP for the tools environment (environments/tools/mcp/): a hostile streamable-HTTP MCP server on loopback,
 * answering raw JSON-RPC so nothing the SDK's server would check stands in its way. Its `initialize`,
 * `tools/list` and `tools/call` answers are fuzzed — near-valid results (helpers/fuzz-bodies.ts), random JSON,
 * garbage; tool lists with duplicate, colliding, reserved or invalid names, endless pages, hundreds of tools,
 * huge or deeply nested schemas, output schemas that cannot compile or backtrack for ever; results that are
 * huge, of the wrong types, or rewards out of range — delivered as JSON or as server-sent events, with wrong
 * statuses, content types or ids, cut off, silent, slow, or streamed without end; the standalone GET stream is
 * refused, held open, endless, or asks the client things. Every episode ends within
 * its time limit with a finite reward: a normal observation, or a failure whose reason is a fixed sentence
 * (the list below) that never carries the server's text.
 *
 * `FUZZ_RUNS=N` runs more (docs/RELIABILITY.md); `FUZZ_SEED` and `FUZZ_PATH` replay a failure fast-check reports.
 */
import fc from 'fast-check';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EnvironmentContext } from '../../environments/environment.ts';
import { runEpisode } from '../../environments/episode-runner.ts';
import { tools, ToolsEnvironmentTask } from '../../environments/tools/definition.ts';
import { ToolsOptions } from '../../environments/tools/task.ts';
import type { Policy, PolicyReply } from '../../shared/ports/policy.ts';
import { bodyText, fuzzBody, type Json } from './helpers/fuzz-bodies.ts';

/** CI runs the same cases every time (a random seed made the suite flaky); FUZZ_SEED explores others. */
const FIXED_SEED = 20261206;

const EMBEDDED: EnvironmentContext = { outbound: { allow: ['loopback'] }, allowCommands: false };
const MAX_BYTES = 65_536;
const MAX_RESULT_CHARS = 500;
const CALL_MS = 400;
const EPISODE_MS = 2_500;
const none = { tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 };

/** Every reason an MCP episode may fail with: fixed sentences naming the server and at most a status, code or tool name. */
const WHAT = String.raw`(initialize|tools/list|tools/call)`;
const OUTBOUND = String.raw`(no complete answer within \d+ ms|the response passed \d+ bytes|the server answered \d+ \(a redirect\); redirects are not followed|could not reach http://127\.0\.0\.1:\d+( \([A-Z_]+\))?|the connection failed while reading the response)`;
const NAME = '[A-Za-z0-9_-]{1,64}';
const FIXED_REASONS = new RegExp(
  '^(' +
    [
      String.raw`MCP server "h", ${WHAT}: ${OUTBOUND}`,
      String.raw`MCP server "h" answered HTTP -?\d+ to ${WHAT}`,
      String.raw`MCP server "h" did not answer ${WHAT} within \d+ ms`,
      String.raw`MCP server "h" closed the connection during ${WHAT}`,
      String.raw`MCP server "h" answered ${WHAT} with JSON-RPC error -?\d+`,
      String.raw`MCP server "h": ${WHAT} failed( \([A-Z_]{1,32}\))?`,
      String.raw`MCP server "h" sent a message over \d+ bytes \(mcp\.maxResponseBytes\)`,
      String.raw`MCP server "h": the connection is closed`,
      String.raw`the episode ran past its time limit \(mcp\.episodeTimeoutMs\)`,
      String.raw`MCP server "h" lists more than 256 tools`,
      String.raw`MCP server "h" pages tools/list past 16 pages`,
      String.raw`MCP server "h" lists a tool whose name is not 1-64 letters, digits, _ or -`,
      String.raw`MCP server "h" lists a tool named "answer", the name of the built-in tool that ends the episode`,
      String.raw`MCP server "h" lists the tool "${NAME}" twice`,
      String.raw`MCP server "h" lists a tool whose input schema nests deeper than 64 levels`,
      String.raw`MCP server "h" answered tools/call with structured content nested deeper than 64 levels`,
      String.raw`no MCP server lists the verifier tool "grade"`,
      String.raw`the verifier tool "grade" answered an error`,
      String.raw`the verifier tool "grade" answered no reward \(structuredContent\.reward, or a number or true/false as its text\)`,
      String.raw`the verifier tool "grade"'s reward is beyond ±1000000`,
      String.raw`the MCP servers' tool schemas pass 65536 characters together; offer fewer with the servers' tools option`,
    ].join('|') +
    ')$',
);

const INIT: Json = { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'hostile', version: '1' } };
const LIST: Json = {
  tools: [
    { name: 'lookup', description: 'Looks a word up.', inputSchema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } },
    { name: 'grade', description: 'The verifier.', inputSchema: { type: 'object', properties: { answer: {} } } },
  ],
};
const RESULT: Json = { content: [{ type: 'text', text: '42' }] };
const GRADE: Json = { content: [{ type: 'text', text: '1' }], structuredContent: { reward: 1 } };

/** Nesting that fits in MAX_BYTES and overflows any recursive walk (JSON.stringify included). */
const DEEP = 20_000;
const tool = (name: unknown, extra: Record<string, unknown> = {}) => ({ name, description: 'd', inputSchema: { type: 'object' }, ...extra });
/** tools/list results no mutation reaches. */
const specialLists: unknown[] = [
  { tools: [tool('lookup'), tool('lookup')] },
  { tools: [tool('answer')] },
  { tools: [tool('grade'), tool('grade'), tool('lookup')] },
  { tools: [tool('has space'), tool('lookup')] },
  { tools: [tool('x'.repeat(65))] },
  { tools: [tool('')] },
  { tools: [tool('__proto__'), tool('constructor'), tool('toString')] },
  { tools: Array.from({ length: 300 }, (_, i) => tool(`t${i}`)) },
  { tools: [tool('lookup')], nextCursor: 'again' },
  { tools: [tool('lookup', { description: 'LEAKED-TEXT '.repeat(4000) })] },
  { tools: [tool('lookup', { inputSchema: { type: 'object', properties: Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`p${i}`, { type: 'string' }])) } })] },
  { tools: [tool('lookup', { outputSchema: { type: 'foo' } })] },
  { tools: [tool('lookup', { outputSchema: { type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } } })] },
  { tools: [tool('lookup', { outputSchema: { $ref: '#/definitions/missing' } })] },
  { tools: [tool('lookup', { outputSchema: { type: 'object', required: ['x'] } })] },
  { tools: [tool('lookup', { inputSchema: { type: 'object', properties: { a: { $ref: '#' } } } })] },
  { tools: [tool('lookup', { inputSchema: { type: 'string' } })] },
  { tools: [tool('lookup', { annotations: { title: 1 }, _meta: 'x', icons: 'nope' })] },
];
const specialListTexts: string[] = [
  ...specialLists.map((l) => JSON.stringify(l)),
  `{"tools":[{"name":"lookup","inputSchema":{"type":"object","properties":{"a":${'{"type":"array","items":'.repeat(2_000)}{}${'}'.repeat(2_000)}}}}]}`,
  `{"tools":[{"name":"lookup","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"a":${'{"anyOf":['.repeat(4_000)}{}${']}'.repeat(4_000)}}}}]}`,
];
/** tools/call results no mutation reaches. */
const specialResults: string[] = [
  JSON.stringify({ content: [{ type: 'text', text: 'LEAKED-TEXT'.repeat(3000) }] }),
  JSON.stringify({ content: [{ type: 'text', text: 'z'.repeat(MAX_BYTES) }] }),
  JSON.stringify({ content: [], structuredContent: { s: `${'a'.repeat(40)}!`, reward: 1 } }),
  JSON.stringify({ content: [{ type: 'image', data: 'AAAA', mimeType: 'image/png' }, { type: 'audio', data: 'x', mimeType: 'a/b' }, { type: 'resource', resource: { uri: 'file:///etc/passwd', text: 'root' } }] }),
  JSON.stringify({ content: [{ type: 'weird'.repeat(100) }] }),
  JSON.stringify({ content: 'not a list' }),
  JSON.stringify({ content: [{ type: 'text', text: 5 }] }),
  JSON.stringify({ isError: true, content: [{ type: 'text', text: 'LEAKED-TEXT failure' }] }),
  JSON.stringify({ isError: 'yes', content: [] }),
  JSON.stringify({ content: [], structuredContent: { reward: 1e7 } }),
  JSON.stringify({ content: [], structuredContent: { reward: 'NaN' } }),
  JSON.stringify({ content: [{ type: 'text', text: '-1e400' }] }),
  JSON.stringify({ content: [{ type: 'text', text: 'true' }] }),
  JSON.stringify({ content: [], structuredContent: [1, 2] }),
  `{"content":[],"structuredContent":{"a":${'['.repeat(DEEP)}${']'.repeat(DEEP)}}}`,
];

type Delivery = 'json' | 'sse' | 'endless' | 'hang-up' | 'silence' | 'wrong-id' | 'error' | 'raw' | 'text/html' | 'no-type' | 'batch';
interface Reply {
  status: number;
  delivery: Delivery;
  body: string;
  delayMs: number;
}

const delay = fc.oneof({ weight: 14, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.integer({ min: 20, max: 150 }) }, { weight: 1, arbitrary: fc.constant(CALL_MS + 200) });
const status = fc.oneof({ weight: 14, arbitrary: fc.constant(200) }, { weight: 1, arbitrary: fc.constantFrom(201, 202, 204, 302, 400, 404, 500) });
const delivery = fc.oneof(
  { weight: 8, arbitrary: fc.constant<Delivery>('json') },
  { weight: 5, arbitrary: fc.constant<Delivery>('sse') },
  { weight: 2, arbitrary: fc.constantFrom<Delivery>('endless', 'hang-up', 'silence', 'wrong-id', 'error', 'raw', 'text/html', 'no-type', 'batch') },
);
/** A valid answer `validWeight` times in 10, so later requests are fuzzed as often as earlier ones. */
function reply(result: fc.Arbitrary<string>, valid: string, validWeight = 4): fc.Arbitrary<Reply> {
  return fc.oneof(
    { weight: validWeight, arbitrary: fc.record({ status: fc.constant(200), delivery: fc.constantFrom<Delivery>('json', 'sse'), body: fc.constant(valid), delayMs: fc.constant(0) }) },
    { weight: 10 - validWeight, arbitrary: fc.record({ status, delivery, body: result, delayMs: delay }) },
  );
}
const fuzzed = (valid: Json, specials: string[]) =>
  fc.oneof({ weight: 6, arbitrary: fuzzBody(valid).map(bodyText) }, { weight: 3, arbitrary: fc.constantFrom(...specials) });

const script = fc.record({
  init: fc.oneof({ weight: 6, arbitrary: fc.constant<Reply>({ status: 200, delivery: 'json', body: JSON.stringify(INIT), delayMs: 0 }) }, { weight: 1, arbitrary: reply(fuzzBody(INIT).map(bodyText), JSON.stringify(INIT)) }),
  lists: fc.array(reply(fuzzed(LIST, specialListTexts), JSON.stringify(LIST), 5), { minLength: 1, maxLength: 3 }),
  calls: fc.array(reply(fuzzed(RESULT, specialResults), JSON.stringify(RESULT)), { minLength: 1, maxLength: 3 }),
  grade: reply(fuzzed(GRADE, specialResults), JSON.stringify(GRADE)),
  /** The standalone GET stream the client opens after initialize: refused, endless, held open, or asking things. */
  get: fc.constantFrom('405', '405', 'endless', 'held', 'requests'),
  verifier: fc.constantFrom('answer', 'tool'),
  toolCalls: fc.boolean(),
  horizon: fc.integer({ min: 1, max: 4 }),
});
type Script = typeof script extends fc.Arbitrary<infer T> ? T : never;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The JSON-RPC answer to request `id` carrying a (fuzzed) result's text, however the reply delivers it. */
function answer(id: Json, r: Reply, res: ServerResponse, req: IncomingMessage): void {
  const message = r.delivery === 'wrong-id' ? `{"jsonrpc":"2.0","id":${JSON.stringify(`not-${String(id)}`)},"result":${r.body}}` : r.delivery === 'error' ? JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32000, message: `LEAKED-TEXT ${r.body.slice(0, 100)}` } }) : `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${r.body}}`;
  switch (r.delivery) {
    case 'silence':
      return;
    case 'hang-up':
      req.socket.destroy();
      return;
    case 'endless': {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x'.repeat(8_000) } })}\n\n`;
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      return pump();
    }
    case 'sse':
      res.writeHead(r.status, { 'content-type': 'text/event-stream' });
      res.write(`event: message\ndata: ${message}\n\n`);
      return void res.end();
    case 'raw':
      return void res.writeHead(r.status, { 'content-type': 'application/json' }).end(r.body);
    case 'text/html':
      return void res.writeHead(r.status, { 'content-type': 'text/html' }).end(message);
    case 'no-type':
      return void res.writeHead(r.status).end(message);
    case 'batch':
      return void res.writeHead(r.status, { 'content-type': 'application/json' }).end(`[${message},${message}]`);
    default:
      res.writeHead(r.status, { 'content-type': 'application/json', ...(r.status === 302 ? { location: 'http://169.254.169.254/' } : {}) }).end(message);
  }
}

function stream(kind: string, res: ServerResponse): void {
  if (kind === '405') return void res.writeHead(405).end();
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  if (kind === 'held') return void res.write(': nothing yet\n\n');
  if (kind === 'requests') {
    for (const [id, method] of [[90, 'sampling/createMessage'], [91, 'roots/list'], [92, 'elicitation/create'], [93, 'ping']] as const) res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id, method, params: {} })}\n\n`);
    res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: [] } })}\n\n`);
    return void res.write('event: message\ndata: LEAKED-TEXT not json\n\n');
  }
  const chunk = `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' })}\n\n`.repeat(100);
  const pump = () => {
    while (!res.destroyed && res.write(chunk));
    if (!res.destroyed) res.once('drain', pump);
  };
  pump();
}

/** Calls the first offered tool, then answers; with toolCalls off, writes the same as JSON text. */
function player(toolCalls: boolean): Policy {
  return {
    async act(messages, { step, tools: offered }): Promise<PolicyReply> {
      const first = offered?.find((t) => t.name !== 'answer')?.name ?? /^- ([A-Za-z0-9_-]+):/m.exec(messages[0]!.content)?.[1] ?? 'lookup';
      const [name, args] = step === 0 && first !== 'answer' ? [first, { q: 'x' }] : ['answer', { value: 42 }];
      return toolCalls ? { text: '', toolCalls: [{ name, arguments: args }], ...none } : { text: JSON.stringify({ tool: name, arguments: args }), ...none };
    },
  };
}

describe('fuzz MCP: a hostile streamable-HTTP server', () => {
  let server: Server;
  let url = '';
  let current: Script | undefined;
  let lists = 0;
  let calls = 0;
  const served: Reply[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.method === 'GET') return void stream(current?.get ?? '405', res);
      if (req.method === 'DELETE') return void res.writeHead(200).end();
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        let message: { id?: Json; method?: string; params?: { name?: string } };
        try {
          message = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof message;
        } catch {
          return void res.writeHead(400).end();
        }
        // Notifications, and the client's answers to the GET stream's requests.
        if (message.id === undefined || message.method === undefined) return void res.writeHead(202).end();
        if (!current) return void res.writeHead(500).end();
        const r =
          message.method === 'initialize'
            ? current.init
            : message.method === 'tools/list'
              ? (current.lists[lists++] ?? current.lists.at(-1)!)
              : message.method === 'tools/call' && message.params?.name === 'grade'
                ? current.grade
                : message.method === 'tools/call'
                  ? (current.calls[calls++] ?? { status: 200, delivery: 'json' as const, body: JSON.stringify(RESULT), delayMs: 0 })
                  : { status: 200, delivery: 'error' as const, body: '', delayMs: 0 };
        served.push(r);
        void sleep(r.delayMs).then(() => (res.destroyed ? undefined : answer(message.id!, r, res, req)));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });

  it('ends every episode in bounded time: a normal observation or a fixed reason, never the server\'s text', async () => {
    const reasons = new Map<string, number>();
    let clean = 0;
    await fc.assert(
      fc.asyncProperty(script, async (s) => {
        current = s;
        lists = 0;
        calls = 0;
        served.length = 0;
        const task = ToolsEnvironmentTask.parse({ kind: 'mcp', question: 'What is it?', verifier: s.verifier === 'answer' ? { kind: 'answer', answer: 42 } : { kind: 'tool', tool: 'grade' } });
        const options = ToolsOptions.parse({
          toolCalls: s.toolCalls,
          horizon: s.horizon,
          mcp: { servers: [{ name: 'h', url }], callTimeoutMs: CALL_MS, episodeTimeoutMs: EPISODE_MS, maxResponseBytes: MAX_BYTES, maxResultChars: MAX_RESULT_CHARS },
        });
        const started = Date.now();
        let hung: NodeJS.Timeout | undefined;
        const result = await Promise.race([
          runEpisode({ definition: tools, task, options, policy: player(s.toolCalls), seed: 0, context: EMBEDDED }),
          new Promise<never>((_, reject) => {
            hung = setTimeout(() => reject(new Error('the episode did not end within its time limit')), EPISODE_MS + 3_000);
          }),
        ]).finally(() => clearTimeout(hung));
        expect(Date.now() - started).toBeLessThan(EPISODE_MS + 3_000);
        expect(Number.isFinite(result.reward)).toBe(true);
        expect(Math.abs(result.reward)).toBeLessThanOrEqual(1e6);
        // What the model is shown is bounded, whatever the server sent.
        for (const entry of result.transcript) if (entry.kind === 'observation') expect(entry.text.length).toBeLessThan(MAX_RESULT_CHARS + 17_000);
        if (result.error === null) {
          clean++;
          expect(['done', 'horizon']).toContain(result.stopReason);
          return;
        }
        expect(result.stopReason).toBe('error');
        expect(result.error).toMatch(FIXED_REASONS);
        expect(result.error).not.toMatch(/LEAKED-TEXT/);
        // A stream without end is cut at the cap (or, on a machine too busy to read 64 KiB in time, at the call
        // limit) — unless the standalone GET stream's 'requests' script answered the request first: it sends a
        // response with id 1 (which MCP forbids on that stream), the SDK takes it as tools/list's empty answer,
        // and the episode ends on that empty list instead.
        if (served.at(-1)?.delivery === 'endless' && s.get !== 'requests') expect(result.error).toMatch(/(over|passed) \d+ bytes|did not answer|no complete answer/);
        const reason = result.error.replace(/\d+/g, 'N');
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 120), ...(process.env.FUZZ_SEED ? { seed: Number(process.env.FUZZ_SEED), path: process.env.FUZZ_PATH, endOnFailure: true } : { seed: FIXED_SEED }) },
    );
    if (process.env.FUZZ_LOG) console.log(clean, [...reasons].sort((a, b) => b[1] - a[1]));
    expect(clean).toBeGreaterThan(10);
    expect(reasons.size).toBeGreaterThan(8);
  }, 60_000 + 150 * Number(process.env.FUZZ_RUNS ?? 0));
});
