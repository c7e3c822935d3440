/**
 * MCP servers that fail or misbehave (environments/tools/mcp/connection.ts): each ends its episode with a fixed
 * reason, in bounded time and memory, never a hang — and a deployed stack's policy refuses what it must.
 */
import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { serveBookshopHttp } from '../../examples/mcp/server.ts';
import { DEPLOYED_CONTEXT, type EnvironmentContext } from '../../environments/environment.ts';
import { runEpisode } from '../../environments/episode-runner.ts';
import { tools, ToolsEnvironmentTask } from '../../environments/tools/definition.ts';
import { ToolsOptions } from '../../environments/tools/task.ts';
import type { Policy, PolicyReply } from '../../shared/ports/policy.ts';

const EMBEDDED: EnvironmentContext = { outbound: { allow: ['loopback'] }, allowCommands: true };
const none = { tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 };
const TASK = ToolsEnvironmentTask.parse({ kind: 'mcp', question: 'q', verifier: { kind: 'answer', answer: 1 } });
const HUGE = 3 * 1024 * 1024;

function calls(list: Array<[string, Record<string, unknown>]>): Policy {
  return {
    async act(_messages, { step }): Promise<PolicyReply> {
      const [name, args] = list[step] ?? ['answer', { value: 1 }];
      return { text: '', toolCalls: [{ name, arguments: args }], ...none };
    },
  };
}

/** A server whose tools hang, answer megabytes, or answer a little too much for the model. */
function hostileServer(): McpServer {
  const server = new McpServer({ name: 'hostile', version: '1' });
  server.registerTool('hang', { description: 'Never answers.', inputSchema: {} }, () => new Promise(() => undefined));
  server.registerTool('huge', { description: 'Answers megabytes.', inputSchema: {} }, async () => ({ content: [{ type: 'text', text: 'x'.repeat(HUGE) }] }));
  server.registerTool('long', { description: 'Answers 20 000 characters.', inputSchema: { n: z.number().optional() } }, async () => ({ content: [{ type: 'text', text: 'y'.repeat(20_000) }] }));
  return server;
}

const listen = (handler: Parameters<typeof createServer>[1]) =>
  new Promise<Server>((resolve) => {
    const s = createServer(handler);
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
const urlOf = (s: Server, path = '/mcp') => `http://127.0.0.1:${(s.address() as AddressInfo).port}${path}`;
const stop = (s: Server) => new Promise<void>((r) => { s.closeAllConnections(); s.close(() => r()); });

describe('hostile and failing MCP servers', () => {
  let hostile: Server;
  let silent: Server;
  let redirecting: Server;
  beforeAll(async () => {
    hostile = await serveBookshopHttp(0, hostileServer);
    // Accepts every request and never answers: initialize must time out.
    silent = await listen(() => undefined);
    redirecting = await listen((_req, res) => res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/' }).end());
  });
  afterAll(async () => {
    await Promise.all([hostile, silent, redirecting].map(stop));
  });

  const play = (url: string, policy: Policy, mcp: Record<string, unknown> = {}, context = EMBEDDED) =>
    runEpisode({ definition: tools, task: TASK, options: ToolsOptions.parse({ toolCalls: true, mcp: { servers: [{ name: 'h', url }], ...mcp } }), policy, seed: 0, context });

  it('ends a call that never answers at the call limit, with the reason', async () => {
    const started = Date.now();
    const r = await play(urlOf(hostile), calls([['hang', {}]]), { callTimeoutMs: 400 });
    expect(r).toMatchObject({ stopReason: 'error', steps: 0 });
    expect(r.error).toMatch(/^MCP server "h"(, tools\/call: no complete answer within \d+ ms| did not answer tools\/call within \d+ ms)$/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('ends at the episode limit when calls keep it busy', async () => {
    const r = await play(urlOf(hostile), calls([['hang', {}]]), { callTimeoutMs: 60_000, episodeTimeoutMs: 1_000 });
    expect(r.stopReason).toBe('error');
    expect(r.durationMs).toBeLessThan(5_000);
  });

  it('ends a server that never answers initialize at the call limit', async () => {
    const started = Date.now();
    const r = await play(urlOf(silent), calls([]), { callTimeoutMs: 300 });
    expect(r).toMatchObject({ stopReason: 'error', error: expect.stringMatching(/^MCP server "h"(, initialize: no complete answer within \d+ ms| did not answer initialize within \d+ ms)$/) });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('bounds a huge result: the body is cut off at maxResponseBytes and the episode fails', async () => {
    const r = await play(urlOf(hostile), calls([['huge', {}]]), { maxResponseBytes: 65_536 });
    expect(r).toMatchObject({ stopReason: 'error', error: expect.stringMatching(/^MCP server "h".*(passed|over) 65536 bytes/) });
    expect(JSON.stringify(r).length).toBeLessThan(20_000);
  });

  it('shows the model at most maxResultChars of a result, saying it was cut', async () => {
    const r = await play(urlOf(hostile), calls([['long', {}], ['answer', { value: 1 }]]), { maxResultChars: 1000 });
    expect(r).toMatchObject({ error: null, reward: 1 });
    const text = r.transcript[3]!.text;
    expect(text).toMatch(/^Result of long: y{1000}\n\[result cut at 1000 of 20000 characters\]/);
  });

  it('does not follow a redirect', async () => {
    const r = await play(urlOf(redirecting), calls([]));
    expect(r).toMatchObject({ stopReason: 'error', error: expect.stringMatching(/^MCP server "h", initialize: the server answered 307 \(a redirect\); redirects are not followed$/) });
  });

  it('refuses plain http, loopback and private addresses under the deployed policy', async () => {
    const http = await play(urlOf(hostile), calls([]), {}, DEPLOYED_CONTEXT);
    expect(http).toMatchObject({ stopReason: 'error', error: expect.stringMatching(/^MCP server "h", its url: http:\/\/ is only for a server on this machine; use https/) });
    const loopback = await play('https://127.0.0.1:9/mcp', calls([]), {}, DEPLOYED_CONTEXT);
    expect(loopback.error).toMatch(/127\.0\.0\.1 is a loopback address, not allowed here/);
    const metadata = await play('https://169.254.169.254/mcp', calls([]), {}, { ...DEPLOYED_CONTEXT, outbound: { allow: ['private', 'loopback'] } });
    expect(metadata.error).toMatch(/link-local, reserved or special address, never reachable/);
  });

  it('refuses one key for servers at two origins', async () => {
    const r = await runEpisode({
      definition: tools,
      task: TASK,
      options: ToolsOptions.parse({ mcp: { servers: [{ name: 'a', url: urlOf(hostile) }, { name: 'b', url: urlOf(silent) }] } }),
      policy: calls([]),
      seed: 0,
      context: { ...EMBEDDED, endpointKey: 'k' },
    });
    expect(r.error).toMatch(/^one endpoint key serves one origin/);
  });

  it('fails cleanly when one of two servers cannot be reached, and names tool clashes', async () => {
    const down = await play('http://127.0.0.1:1/mcp', calls([]));
    expect(down.error).toMatch(/^MCP server "h", initialize: could not reach http:\/\/127\.0\.0\.1:1/);
    const clash = await runEpisode({
      definition: tools,
      task: TASK,
      options: ToolsOptions.parse({ mcp: { servers: [{ name: 'a', url: urlOf(hostile) }, { name: 'b', url: urlOf(hostile) }] } }),
      policy: calls([]),
      seed: 0,
      context: EMBEDDED,
    });
    expect(clash.error).toBe('MCP servers "a" and "b" both list a tool "hang"; offer one with the servers\' tools option');
  });
});

describe('hostile stdio servers', () => {
  const node = (script: string, mcp: Record<string, unknown> = {}) =>
    runEpisode({ definition: tools, task: TASK, options: ToolsOptions.parse({ mcp: { servers: [{ name: 's', command: [process.execPath, '-e', script] }], ...mcp } }), policy: calls([]), seed: 0, context: EMBEDDED });
  const children = () => execFileSync('ps', ['-o', 'args=', '--ppid', String(process.pid)], { encoding: 'utf8' }).split('\n').filter((l) => l.includes('hostile-stdio'));

  it('ends a program that never answers at the call limit, and the program with it', async () => {
    const r = await node('/* hostile-stdio */ process.stdin.resume(); setInterval(() => {}, 1000)', { callTimeoutMs: 300 });
    expect(r).toMatchObject({ stopReason: 'error', error: 'MCP server "s" did not answer initialize within 300 ms' });
    expect(children()).toEqual([]);
  });

  it('bounds a message without end: past maxResponseBytes the connection ends', async () => {
    const started = Date.now();
    const r = await node("/* hostile-stdio */ process.stdin.once('data', () => { const x = 'x'.repeat(65536); const more = () => { while (process.stdout.write(x)); process.stdout.once('drain', more); }; more(); })", { maxResponseBytes: 65_536, callTimeoutMs: 20_000 });
    expect(r).toMatchObject({ stopReason: 'error', error: 'MCP server "s" sent a message over 65536 bytes (mcp.maxResponseBytes)' });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(children()).toEqual([]);
  });
});

/**
 * Found by test/reliability/fuzz-mcp.test.ts: a raw streamable-HTTP server (plain JSON answers, no SDK) whose
 * tools/list and tools/call answers are fixed per test.
 */
describe('hostile tool lists and results', () => {
  let list: unknown = {};
  let result: unknown = {};
  let raw: Server;
  beforeAll(async () => {
    raw = await listen((req, res) => {
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const m = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: number; method: string };
        if (m.id === undefined) return void res.writeHead(202).end();
        const answer = m.method === 'initialize' ? { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'raw', version: '1' } } : m.method === 'tools/list' ? list : result;
        // Spliced as text: JSON.stringify itself overflows on the deep ones.
        res.writeHead(200, { 'content-type': 'application/json' }).end(`{"jsonrpc":"2.0","id":${m.id},"result":${typeof answer === 'string' ? answer : JSON.stringify(answer)}}`);
      });
    });
  });
  afterAll(() => stop(raw));
  const play = (url: string, policy: Policy) => runEpisode({ definition: tools, task: TASK, options: ToolsOptions.parse({ toolCalls: true, mcp: { servers: [{ name: 'h', url }] } }), policy, seed: 0, context: EMBEDDED });
  const lookup = (extra: Record<string, unknown> = {}) => ({ name: 'lookup', description: 'd', inputSchema: { type: 'object' }, ...extra });

  it('never compiles a server\'s outputSchema: a backtracking pattern cannot stall the process', async () => {
    list = { tools: [lookup({ outputSchema: { type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } } })] };
    result = { content: [{ type: 'text', text: 'ok' }], structuredContent: { s: `${'a'.repeat(40)}!` } };
    const started = Date.now();
    const r = await play(urlOf(raw), calls([['lookup', {}], ['answer', { value: 1 }]]));
    expect(r).toMatchObject({ error: null, reward: 1 });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('fails a schema or a result nested past 64 levels with a fixed reason, not a stack overflow', async () => {
    list = `{"tools":[{"name":"lookup","inputSchema":{"type":"object","properties":{"a":${'{"type":"array","items":'.repeat(5_000)}{}${'}'.repeat(5_000)}}}}]}`;
    expect((await play(urlOf(raw), calls([]))).error).toBe('MCP server "h" lists a tool whose input schema nests deeper than 64 levels');
    list = { tools: [lookup()] };
    result = `{"content":[],"structuredContent":{"a":${'['.repeat(5_000)}${']'.repeat(5_000)}}}`;
    expect((await play(urlOf(raw), calls([['lookup', {}]]))).error).toBe('MCP server "h" answered tools/call with structured content nested deeper than 64 levels');
  });

  it('keeps no listener per call on the connection (the SDK never removes the abort listener it adds)', async () => {
    list = { tools: [lookup()] };
    result = { content: [{ type: 'text', text: 'ok' }] };
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const many = Array.from({ length: 15 }, (): [string, Record<string, unknown>] => ['lookup', {}]);
      const r = await runEpisode({ definition: tools, task: TASK, options: ToolsOptions.parse({ toolCalls: true, horizon: 20, mcp: { servers: [{ name: 'h', url: urlOf(raw) }] } }), policy: calls(many), seed: 0, context: EMBEDDED });
      expect(r).toMatchObject({ error: null, steps: 16 });
      await new Promise((r) => setImmediate(r));
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('names a tool one server lists twice', async () => {
    list = { tools: [lookup(), lookup()] };
    expect((await play(urlOf(raw), calls([]))).error).toBe('MCP server "h" lists the tool "lookup" twice');
  });
});
