/**
 * The tools environment with MCP servers (environments/tools/mcp/): the example bookshop server, built on the
 * SDK, over streamable HTTP on 127.0.0.1 and over stdio. Listing becomes the chat tools or the prompt, calls go
 * to the server and come back as tool messages, and each kind of verifier judges the final answer.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createBookshopServer, serveBookshopHttp } from '../../examples/mcp/server.ts';
import type { EnvironmentContext } from '../../environments/environment.ts';
import { runEpisode } from '../../environments/episode-runner.ts';
import { tools, ToolsEnvironmentTask } from '../../environments/tools/definition.ts';
import { ToolsOptions } from '../../environments/tools/task.ts';
import { parseSuiteJsonl } from '../../environments/task-suites/parse-suite-file.ts';
import type { ChatMessage, Policy, PolicyReply, ToolCall } from '../../shared/ports/policy.ts';

const EMBEDDED: EnvironmentContext = { outbound: { allow: ['loopback'] }, allowCommands: true };
const none = { tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 };
const STDIO = [process.execPath, '--import', 'tsx', 'examples/mcp/server.ts', '--stdio'];

/** Plays the given calls in order as chat tool_calls, keeping every prompt it was shown. */
function calls(list: Array<[string, Record<string, unknown>]>, seen: ChatMessage[][] = []): Policy {
  return {
    async act(messages, { step }): Promise<PolicyReply> {
      seen.push(messages);
      const [name, args] = list[step] ?? ['answer', { value: 'out of script' }];
      return { text: '', toolCalls: [{ id: `call_${step}`, name, arguments: args } as ToolCall], ...none };
    },
  };
}

const task = (verifier: unknown, question = 'How much does Kindred cost, in US cents?') => ToolsEnvironmentTask.parse({ kind: 'mcp', question, verifier });

describe('MCP tools over streamable HTTP', () => {
  let server: Server;
  let url = '';
  beforeAll(async () => {
    server = await serveBookshopHttp(0);
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  const options = (extra: Record<string, unknown> = {}, mcp: Record<string, unknown> = {}) => ToolsOptions.parse({ toolCalls: true, ...extra, mcp: { servers: [{ url }], ...mcp } });

  it("offers the server's tools/list schemas as chat tools, the verifier tool hidden", async () => {
    const env = await tools.create(task({ kind: 'tool', tool: 'grade', arguments: { expected: 1550 } }), options(), EMBEDDED);
    try {
      expect(env.tools?.map((t) => t.name)).toEqual(['search_books', 'get_book', 'answer']);
      const search = env.tools!.find((t) => t.name === 'search_books')!;
      expect(search.description).toMatch(/title or author/);
      expect(search.parameters).toMatchObject({ type: 'object', properties: { query: { type: 'string' } }, required: ['query'] });
      expect(search.parameters).not.toHaveProperty('$schema');
      expect(env.horizon).toBe(10);
    } finally {
      await env.close();
    }
    // An answer-verified task offers grade like any tool, unless the server's tools option leaves it out.
    const plain = await tools.create(task({ kind: 'answer', answer: 1550 }), options({}, { servers: [{ url, tools: ['get_book'] }] }), EMBEDDED);
    expect(plain.tools?.map((t) => t.name)).toEqual(['get_book', 'answer']);
    await plain.close();
  });

  it('puts the schemas in the system prompt without toolCalls', async () => {
    const env = await tools.create(task({ kind: 'answer', answer: 1550 }), options({ toolCalls: false }, { instructions: 'You work at a bookshop.' }), EMBEDDED);
    try {
      expect(env.tools).toBeUndefined();
      expect(env.systemPrompt.split('\n')[0]).toBe('You work at a bookshop.');
      expect(env.systemPrompt).toMatch(/^- get_book: One book by id.*Arguments: \{"type":"object","properties":\{"id":/m);
      expect(env.systemPrompt).toMatch(/^- answer: /m);
    } finally {
      await env.close();
    }
  });

  it('sends calls to the server and brings results back as tool messages, then judges the answer', async () => {
    const seen: ChatMessage[][] = [];
    const policy = calls([['search_books', { query: 'butler' }], ['get_book', { id: 'b3' }], ['answer', { value: '1550 cents' }]], seen);
    const r = await runEpisode({ definition: tools, task: task({ kind: 'answer', answer: 1550 }), options: options(), policy, seed: 0, context: EMBEDDED });
    expect(r).toMatchObject({ reward: 1, steps: 3, stopReason: 'done', error: null });
    const toolTurn = seen[1]!.at(-1)!;
    expect(toolTurn).toMatchObject({ role: 'tool', toolCallId: 'call_0' });
    expect(toolTurn.content).toMatch(/^Result of search_books: .*"Kindred".*"Parable of the Sower"/);
    expect(seen[2]!.at(-1)!.content).toContain('"priceCents":1550');
    // A wrong answer: reward 0, same path.
    const wrong = await runEpisode({ definition: tools, task: task({ kind: 'answer', answer: 1550 }), options: options(), policy: calls([['answer', { value: 1425 }]]), seed: 0, context: EMBEDDED });
    expect(wrong).toMatchObject({ reward: 0, stopReason: 'done', error: null });
  });

  it("turns the model's mistakes into error observations that use a step", async () => {
    const policy = calls([['no_such_tool', {}], ['get_book', { id: 'b99' }], ['get_book', { nope: 1 }], ['answer', { value: 1550 }]]);
    const r = await runEpisode({ definition: tools, task: task({ kind: 'answer', answer: 1550 }), options: options(), policy, seed: 0, context: EMBEDDED });
    expect(r).toMatchObject({ reward: 1, steps: 4, error: null });
    const observations = r.transcript.filter((t) => t.kind === 'observation').map((t) => t.text);
    expect(observations[1]).toMatch(/^Error: unknown tool "no_such_tool" \(tools: search_books, get_book, grade, answer\)/);
    expect(observations[2]).toMatch(/^Error: get_book failed: no book with id b99/);
    expect(observations[3]).toMatch(/^Error: get_book failed: .*id/s);
  });

  it('judges with a verifier tool on the server: its structured reward', async () => {
    const verifier = { kind: 'tool', tool: 'grade', arguments: { expected: 1550 } };
    const right = await runEpisode({ definition: tools, task: task(verifier), options: options(), policy: calls([['answer', { value: 1550 }]]), seed: 0, context: EMBEDDED });
    expect(right).toMatchObject({ reward: 1, error: null });
    const wrong = await runEpisode({ definition: tools, task: task(verifier), options: options(), policy: calls([['answer', { value: 999 }]]), seed: 0, context: EMBEDDED });
    expect(wrong).toMatchObject({ reward: 0, error: null });
    // The model cannot call the verifier itself.
    const sneaky = await runEpisode({ definition: tools, task: task(verifier), options: options(), policy: calls([['grade', { answer: 1, expected: 1 }], ['answer', { value: 1 }]]), seed: 0, context: EMBEDDED });
    expect(sneaky.transcript[3]).toMatchObject({ kind: 'observation', text: expect.stringMatching(/^Error: unknown tool "grade"/) });
    expect(sneaky.reward).toBe(0);
    // A verifier no server lists fails the episode at the start, saying so.
    const missing = await runEpisode({ definition: tools, task: task({ kind: 'tool', tool: 'judge' }), options: options(), policy: calls([]), seed: 0, context: EMBEDDED });
    expect(missing).toMatchObject({ stopReason: 'error', error: 'no MCP server lists the verifier tool "judge"' });
  });

  it('judges with a JSON predicate over the final answer (an object, or JSON in a string)', async () => {
    const verifier = { kind: 'predicate', predicate: { all: [{ path: '/title', matches: '^Kindred$' }, { path: '/stock', gte: 5 }] } };
    const q = 'Which Butler book has at least 5 copies? Answer {"title", "stock"}.';
    const play = (value: unknown) => runEpisode({ definition: tools, task: task(verifier, q), options: options(), policy: calls([['answer', { value }]]), seed: 0, context: EMBEDDED });
    expect((await play({ title: 'Kindred', stock: 7 })).reward).toBe(1);
    expect((await play('{"title": "Kindred", "stock": 7}')).reward).toBe(1);
    expect((await play({ title: 'Parable of the Sower', stock: 2 })).reward).toBe(0);
    expect((await play('Kindred')).reward).toBe(0);
  });

  it('refuses tasks and options that do not fit, with the field', () => {
    const bad = ToolsEnvironmentTask.safeParse({ kind: 'mcp', question: 'q', verifier: { kind: 'predicate', predicate: { path: '/x', matches: '(?=a)' } } });
    expect(bad.success).toBe(false);
    expect(bad.error!.issues[0]!.path.join('.')).toBe('verifier.predicate.matches');
    const both = ToolsOptions.safeParse({ mcp: { servers: [{ url, command: ['x'] }] } });
    expect(both.error!.issues[0]).toMatchObject({ path: ['mcp', 'servers', 0], message: expect.stringMatching(/exactly one of url .* or command/) });
    const twins = ToolsOptions.safeParse({ mcp: { servers: [{ url }, { url }] } });
    expect(twins.error!.issues[0]).toMatchObject({ path: ['mcp', 'servers', 1, 'name'] });
    const secretEnv = ToolsOptions.safeParse({ mcp: { servers: [{ command: ['x'], env: { AWS_SECRET_ACCESS_KEY: 'k' } }] } });
    expect(secretEnv.error!.issues[0]!.path.join('.')).toBe('mcp.servers.0.env.AWS_SECRET_ACCESS_KEY');
  });

  it('keeps built-in and MCP tasks apart, and samples MCP tasks by content hash', async () => {
    const o = options();
    await expect(tools.create(task({ kind: 'answer', answer: 1 }), ToolsOptions.parse({}), EMBEDDED)).rejects.toThrow(/needs MCP servers: set options.mcp.servers/);
    const builtin = tools.sampleTasks('train', 1, 0, ToolsOptions.parse({}))[0]!.task;
    await expect(tools.create(builtin, o, EMBEDDED)).rejects.toThrow(/a built-in tools task has no MCP servers/);
    expect(() => tools.sampleTasks('train', 1, 0, o)).toThrow(/list tasks in options.mcp.tasks, or push a task suite/);
    const list = Array.from({ length: 24 }, (_, i) => ({ kind: 'mcp', question: `What is ${i} + 1?`, verifier: { kind: 'answer', answer: i + 1 } }));
    const withTasks = options({}, { tasks: list });
    const train = tools.sampleTasks('train', 4, 1, withTasks);
    const held = tools.sampleTasks('eval', 2, 1, withTasks);
    expect(train).toHaveLength(4);
    expect(train.map((t) => t.id).filter((id) => held.some((h) => h.id === id))).toEqual([]);
    expect(tools.sampleTasks('train', 4, 1, withTasks)).toEqual(train);
    // The answer oracle wins an answer-verified task.
    const oracle = await runEpisode({ definition: tools, task: train[0]!.task, options: withTasks, policy: tools.oracle(train[0]!.task, withTasks), seed: 0, context: EMBEDDED });
    expect(oracle).toMatchObject({ reward: 1, error: null });
    expect(() => tools.oracle(task({ kind: 'predicate', predicate: { equals: 1 } }), withTasks)).toThrow(/has no oracle/);
  });

  it('takes MCP tasks in a pushed suite, refusing a bad line with its number and field', () => {
    const good = { kind: 'mcp', question: 'Who wrote Solaris?', verifier: { kind: 'answer', answer: 'Stanisław Lem' } };
    expect(parseSuiteJsonl(`${JSON.stringify(good)}\n`, tools.taskSchema, 'tools')).toEqual([good]);
    const bad = { kind: 'mcp', question: 'q', verifier: { kind: 'tool' } };
    expect(() => parseSuiteJsonl(`${JSON.stringify(good)}\n${JSON.stringify(bad)}\n`, tools.taskSchema, 'tools')).toThrow(/line 2: .*verifier\.tool/s);
  });

  it('sends the endpoint key as a Bearer token', async () => {
    const seenAuth: Array<string | undefined> = [];
    const keyed = await serveBookshopHttp(0);
    keyed.prependListener('request', (req) => seenAuth.push(req.headers.authorization));
    try {
      const keyedUrl = `http://127.0.0.1:${(keyed.address() as AddressInfo).port}/mcp`;
      const r = await runEpisode({ definition: tools, task: task({ kind: 'answer', answer: 1550 }), options: ToolsOptions.parse({ mcp: { servers: [{ url: keyedUrl }] } }), policy: calls([['answer', { value: 1550 }]]), seed: 0, context: { ...EMBEDDED, endpointKey: 'k-123' } });
      expect(r.error).toBeNull();
      expect(seenAuth.length).toBeGreaterThan(0);
      expect(seenAuth.every((a) => a === 'Bearer k-123')).toBe(true);
    } finally {
      await new Promise<void>((r) => keyed.close(() => r()));
    }
  });
});

describe('MCP tools against a server that keeps sessions', () => {
  it('plays in a session (its GET stream too) and deletes it at close', async () => {
    const sessions = new Map<string, StreamableHTTPServerTransport>();
    const methods: string[] = [];
    const http = createServer(async (req, res) => {
      methods.push(req.method!);
      const id = req.headers['mcp-session-id'];
      let transport = typeof id === 'string' ? sessions.get(id) : undefined;
      if (!transport) {
        const fresh = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (sid) => void sessions.set(sid, fresh) });
        fresh.onclose = () => fresh.sessionId && sessions.delete(fresh.sessionId);
        await createBookshopServer().connect(fresh);
        transport = fresh;
      }
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', () => r()));
    try {
      const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
      const options = ToolsOptions.parse({ toolCalls: true, mcp: { servers: [{ url }], callTimeoutMs: 2_000 } });
      const r = await runEpisode({ definition: tools, task: task({ kind: 'tool', tool: 'grade', arguments: { expected: 7 } }), options, policy: calls([['get_book', { id: 'b3' }], ['answer', { value: 7 }]]), seed: 0, context: EMBEDDED });
      expect(r).toMatchObject({ reward: 1, steps: 2, error: null });
      expect(methods).toContain('GET');
      expect(methods.at(-1)).toBe('DELETE');
      expect(sessions.size).toBe(0);
    } finally {
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
    }
  });
});

describe('MCP tools over stdio', () => {
  const stdio = (extra: Record<string, unknown> = {}) => ToolsOptions.parse({ toolCalls: true, mcp: { servers: [{ name: 'shop', command: STDIO, ...extra }] } });
  const children = () => execFileSync('ps', ['-o', 'args=', '--ppid', String(process.pid)], { encoding: 'utf8' }).split('\n').filter((l) => l.includes('server.ts --stdio'));

  it('starts the command per episode, plays it, and ends the program at close', async () => {
    const verifier = { kind: 'tool', tool: 'grade', server: 'shop', arguments: { expected: 'Solaris' } };
    const r = await runEpisode({ definition: tools, task: task(verifier, 'Which book by Lem do we sell?'), options: stdio(), policy: calls([['search_books', { query: 'Lem' }], ['answer', { value: 'Solaris' }]]), seed: 0, context: EMBEDDED });
    expect(r).toMatchObject({ reward: 1, steps: 2, error: null });
    expect(r.transcript[3]).toMatchObject({ kind: 'observation', text: expect.stringContaining('"title":"Solaris"') });
    expect(children()).toEqual([]);
  }, 30_000);

  it('closes an episode whose start came after its deadline, so its program does not linger', async () => {
    const r = await runEpisode({ definition: tools, task: task({ kind: 'answer', answer: 1 }), options: stdio(), policy: calls([]), seed: 0, context: EMBEDDED, deadline: Date.now() + 50 });
    expect(r.stopReason).toBe('deadline');
    for (let waited = 0; waited < 10_000 && children().length > 0; waited += 100) await new Promise((w) => setTimeout(w, 100));
    // Started late, then closed: give the connect its time, then nothing of it is left.
    await new Promise((w) => setTimeout(w, 1500));
    expect(children()).toEqual([]);
  }, 30_000);

  it('refuses a command where the context allows none (a deployed stack, the HTTP API)', async () => {
    const r = await runEpisode({ definition: tools, task: task({ kind: 'answer', answer: 1 }), options: stdio(), policy: calls([]), seed: 0, context: { ...EMBEDDED, allowCommands: false } });
    expect(r).toMatchObject({ stopReason: 'error', error: expect.stringMatching(/^MCP server "shop" names a command: programs start only in an embedded run/) });
    expect(children()).toEqual([]);
  });

  it('fails the episode, naming the server, when the program cannot start', async () => {
    const r = await runEpisode({ definition: tools, task: task({ kind: 'answer', answer: 1 }), options: ToolsOptions.parse({ mcp: { servers: [{ name: 'ghost', command: ['/nonexistent/mcp-server'] }] } }), policy: calls([]), seed: 0, context: EMBEDDED });
    expect(r).toMatchObject({ stopReason: 'error', error: 'MCP server "ghost": initialize failed (ENOENT)' });
  });
});
