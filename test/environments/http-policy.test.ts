import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runEpisode } from '../../environments/episode-runner.ts';
import { HttpPolicy, backoffMs, parseRetryAfter, type HttpPolicyOptions } from '../../environments/policies/http-client.ts';
import { IterationClosedError, PolicyHttpError } from '../../environments/policies/http-errors.ts';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { SudokuOptions } from '../../environments/sudoku/task.ts';
import { tools } from '../../environments/tools/definition.ts';
import { solveToolsTask, ToolsOptions, ToolsTask } from '../../environments/tools/task.ts';
import { main } from '../../trainer/cli/main.ts';

/**
 * A real OpenAI-shaped endpoint on 127.0.0.1, scripted per test: each request takes the next
 * handler from `script` (the last one repeats), and every request is recorded.
 */
type Handler = (c: Context) => Response | Promise<Response>;
const script: Handler[] = [];
const requests: Array<{ at: number; authorization: string | undefined; body: Record<string, unknown> }> = [];
let baseUrl = '';
let server: ReturnType<typeof serve>;

const completion = (content: string | null, extra: Record<string, unknown> = {}) => ({
  id: 'chatcmpl-test',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content, ...extra }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 },
});
const ok = (content: string | null, extra?: Record<string, unknown>): Handler => (c) => c.json(completion(content, extra));
const status = (code: number, headers: Record<string, string> = {}): Handler => (c) => c.json({ error: { message: `scripted ${code}` } }, code as 400, headers);

beforeAll(async () => {
  const app = new Hono();
  app.post('/v1/chat/completions', async (c) => {
    requests.push({ at: performance.now(), authorization: c.req.header('authorization'), body: await c.req.json() });
    const handler = script.length > 1 ? script.shift()! : script[0];
    return handler(c);
  });
  server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await once(server, 'listening');
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  script.length = 0;
  requests.length = 0;
});

const fast: Partial<HttpPolicyOptions> = { backoffBaseMs: 5, backoffMaxMs: 20 };
const policy = (o: Partial<HttpPolicyOptions> = {}) => new HttpPolicy({ baseUrl, model: 'member-3-1', ...fast, ...o });
const messages = [{ role: 'user' as const, content: 'hi' }];

describe('HttpPolicy', () => {
  it('sends pictures as image_url parts; a tool turn keeps its text, its pictures follow in a user turn', async () => {
    script.push(ok('click(1, 2)'));
    const url = 'data:image/png;base64,iVBORw0KGgo=';
    await policy().act(
      [
        { role: 'system', content: 'look' },
        { role: 'user', content: 'the page', images: [url] },
        { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'click', arguments: { id: 3 } }] },
        { role: 'tool', content: 'clicked', toolCallId: 'call_1', images: [url] },
      ],
      { step: 1 },
    );
    const sent = requests[0]!.body.messages as Record<string, unknown>[];
    expect(sent.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'user']);
    expect(sent[0]!.content).toBe('look');
    expect(sent[1]!.content).toEqual([{ type: 'text', text: 'the page' }, { type: 'image_url', image_url: { url } }]);
    expect(sent[3]).toMatchObject({ role: 'tool', content: 'clicked', tool_call_id: 'call_1' });
    expect(sent[4]!.content).toEqual([{ type: 'image_url', image_url: { url } }]);
  });

  it('posts an OpenAI chat completion with the bearer token and reads text and usage back', async () => {
    script.push(ok('place 1 1 2'));
    const r = await policy({ token: 'secret-token', maxTokens: 20, temperature: 0.5, seed: 7 }).act(messages, { step: 2 });
    expect(r).toMatchObject({ text: 'place 1 1 2', tokens: { prompt: 11, completion: 3 } });
    expect(r.toolCalls).toBeUndefined();
    expect(requests).toHaveLength(1);
    expect(requests[0].authorization).toBe('Bearer secret-token');
    expect(requests[0].body).toMatchObject({ model: 'member-3-1', messages, max_tokens: 20, temperature: 0.5, top_p: 1 });
    expect(requests[0].body.seed).toEqual(expect.any(Number));
    expect(requests[0].body).not.toHaveProperty('tools');
  });

  it('sends a different sampling seed per step, the same one for the same step', async () => {
    script.push(ok('x'));
    const p = policy({ seed: 7 });
    await p.act(messages, { step: 0 });
    await p.act(messages, { step: 1 });
    await p.act(messages, { step: 0 });
    expect(requests[0].body.seed).not.toBe(requests[1].body.seed);
    expect(requests[0].body.seed).toBe(requests[2].body.seed);
  });

  it("parses the chat API's tool_calls into toolCalls and forwards the environment's tools", async () => {
    script.push(
      ok(null, {
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'find_person', arguments: '{"name":"Alice"}' } },
          { id: 'call_2', type: 'function', function: { name: 'calculator', arguments: '{"expression": ' } },
        ],
      }),
    );
    const spec = { name: 'find_person', description: 'look up', parameters: { type: 'object' } };
    const r = await policy().act(messages, { step: 0, tools: [spec] });
    expect(r.text).toBe('');
    expect(r.toolCalls).toEqual([
      { id: 'call_1', name: 'find_person', arguments: { name: 'Alice' } },
      { id: 'call_2', name: 'calculator', arguments: '{"expression": ' }, // malformed JSON is left for the environment to reject
    ]);
    expect(requests[0].body.tools).toEqual([{ type: 'function', function: spec }]);
  });

  it('retries a 429 after the Retry-After the server asked for, then succeeds', async () => {
    script.push(status(429, { 'retry-after': '1' }), ok('done'));
    const r = await policy({ backoffBaseMs: 1 }).act(messages, { step: 0 });
    expect(r.text).toBe('done');
    expect(requests).toHaveLength(2);
    expect(requests[1].at - requests[0].at).toBeGreaterThanOrEqual(950);
  });

  it('caps a huge Retry-After', async () => {
    script.push(status(429, { 'retry-after': '3600' }), ok('done'));
    expect((await policy({ retryAfterMaxMs: 10 }).act(messages, { step: 0 })).text).toBe('done');
  });

  it('keeps retrying a full queue (429) past `retries` within queueFullBudgetMs, then counts them as failures', async () => {
    script.push(...Array.from({ length: 6 }, () => status(429, { 'retry-after': '0' })), ok('admitted'));
    expect((await policy({ retries: 1 }).act(messages, { step: 0 })).text).toBe('admitted');
    expect(requests).toHaveLength(7);

    requests.length = 0;
    script.length = 0;
    script.push(status(429, { 'retry-after': '0' }));
    const err = await policy({ retries: 2, queueFullBudgetMs: 0 }).act(messages, { step: 0 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'PolicyHttpError', status: 429, attempts: 3, message: expect.stringMatching(/gave up after 3 attempts/) });
  });

  it('retries 5xx with back-off and gives up with PolicyHttpError when retries run out', async () => {
    script.push(status(503), status(500), ok('third time'));
    expect((await policy().act(messages, { step: 0 })).text).toBe('third time');
    expect(requests).toHaveLength(3);

    requests.length = 0;
    script.length = 0;
    script.push(status(502));
    const err = await policy({ retries: 2 }).act(messages, { step: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PolicyHttpError);
    expect(err).toMatchObject({ status: 502, attempts: 3, message: expect.stringMatching(/HTTP 502.*gave up after 3 attempts/) });
    expect(requests).toHaveLength(3);
  });

  it('fails over to the next server (a trainer replica) on a refused connection or a 5xx, and stays there', async () => {
    script.push(ok('a'), ok('b'));
    // Port 1 on loopback refuses connections: the member's replica is gone.
    const p = policy({ baseUrl: 'http://127.0.0.1:1/v1', fallbackUrls: [baseUrl] });
    expect((await p.act(messages, { step: 0 })).text).toBe('a');
    expect((await p.act(messages, { step: 1 })).text).toBe('b');
    expect(requests).toHaveLength(2);
    expect(p.url).toBe(`${baseUrl}/chat/completions`);

    script.length = 0;
    requests.length = 0;
    script.push(status(503), ok('c'));
    // Both URLs name the scripted server: the 503 moves the episode on, and the next server answers.
    const q = policy({ fallbackUrls: [`${baseUrl}/`] });
    expect((await q.act(messages, { step: 0 })).text).toBe('c');
    expect(q.url).toBe(`${baseUrl}/chat/completions`);
    expect(requests).toHaveLength(2);
  });

  it('turns HTTP 409 into IterationClosedError at once, without retrying', async () => {
    script.push(status(409));
    const err = await policy().act(messages, { step: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IterationClosedError);
    expect(requests).toHaveLength(1);
  });

  it('does not retry other 4xx, and rejects a body that is not a chat completion', async () => {
    script.push(status(400));
    await expect(policy().act(messages, { step: 0 })).rejects.toMatchObject({ name: 'PolicyHttpError', status: 400, message: expect.stringMatching(/HTTP 400: .*scripted 400/) });
    expect(requests).toHaveLength(1);
    script.length = 0;
    script.push((c) => c.json({ choices: [] }));
    await expect(policy().act(messages, { step: 0 })).rejects.toThrow(/not a chat completion/);
  });

  it('times a slow request out and retries it', async () => {
    script.push(async (c) => {
      await new Promise((resolve) => setTimeout(resolve, 400));
      return c.json(completion('too late'));
    }, ok('fast'));
    expect((await policy({ timeoutMs: 100 }).act(messages, { step: 0 })).text).toBe('fast');
    expect(requests).toHaveLength(2);
  });

  it('retries network errors and reports them when nobody ever answers', async () => {
    const closed = serve({ fetch: () => new Response('x'), port: 0, hostname: '127.0.0.1' });
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const p = new HttpPolicy({ baseUrl: `http://127.0.0.1:${port}/v1`, model: 'base', retries: 2, ...fast });
    await expect(p.act(messages, { step: 0 })).rejects.toMatchObject({ name: 'PolicyHttpError', status: null, attempts: 3, message: expect.stringMatching(/network error/) });
  });

  it("stops at once when the caller's signal aborts, without retrying", async () => {
    script.push(async (c) => {
      await new Promise((resolve) => setTimeout(resolve, 2000));
      return c.json(completion('never'));
    });
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('shutting down')), 50);
    const started = performance.now();
    await expect(policy().act(messages, { step: 0, signal: controller.signal })).rejects.toThrow('shutting down');
    expect(performance.now() - started).toBeLessThan(1500);
    expect(requests).toHaveLength(1);
  });

  it('is built from an EpisodeRequest endpoint, with the token from the variable it names', async () => {
    script.push(ok('x'));
    const generation = { temperature: 0.7, topP: 0.9, topK: 5, maxTokens: 12 };
    const p = HttpPolicy.fromEndpoint({ baseUrl, model: 'member-2-0', tokenEnv: 'RUN_TOKEN' }, generation, 9, fast, { RUN_TOKEN: 't0k' });
    await p.act(messages, { step: 0 });
    expect(requests[0]).toMatchObject({ authorization: 'Bearer t0k', body: { model: 'member-2-0', temperature: 0.7, top_p: 0.9, top_k: 5, max_tokens: 12 } });
    expect(() => HttpPolicy.fromEndpoint({ baseUrl, model: 'base', tokenEnv: 'MISSING_TOKEN' }, generation, 0, {}, {})).toThrow(/MISSING_TOKEN .* is not set/);
  });

  it('Retry-After and back-off arithmetic', () => {
    expect(parseRetryAfter('2')).toBe(2000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).toBe(6000);
    expect(parseRetryAfter('soon')).toBeNull();
    expect(parseRetryAfter(null)).toBeNull();
    expect(backoffMs(0, 100, 10_000, () => 0)).toBe(50);
    expect(backoffMs(3, 100, 10_000, () => 0.999999)).toBeCloseTo(800, 3);
    expect(backoffMs(20, 100, 10_000, () => 1)).toBe(10_000);
  });
});

describe('episodes over HTTP', () => {
  const task = { puzzle: '..31.1..42131.24', size: 4 } as const;
  const moves = ['place 1 1 2', 'place 1 2 4', 'place 2 1 3', 'place 2 3 4', 'place 2 4 2', 'place 4 2 3'];

  it('solves a sudoku through an endpoint that answers like the oracle, with a 429 on the way', async () => {
    script.push(status(429, { 'retry-after': '0' }), ...moves.map((m) => ok(`Let me think. ${m}`)));
    const r = await runEpisode({ definition: sudoku, task, policy: policy(), seed: 0 });
    expect(r).toMatchObject({ reward: 1, steps: 6, error: null, tokens: { prompt: 66, completion: 18 } });
    expect(requests).toHaveLength(7);
    // The chat grows by the assistant's reply and the next observation each turn.
    expect((requests.at(-1)!.body.messages as unknown[]).length).toBe(2 + 2 * 5);
  });

  it('a 409 mid-episode ends it cleanly as iteration-closed', async () => {
    script.push(ok(moves[0]), ok(moves[1]), status(409));
    const r = await runEpisode({ definition: sudoku, task, options: SudokuOptions.parse({}), policy: policy(), seed: 0 });
    expect(r).toMatchObject({ steps: 2, stopReason: 'iteration-closed', reward: 0 });
    expect(requests).toHaveLength(3);
  });

  it('a tool-use episode played with tool_calls replies', async () => {
    const t = ToolsTask.parse(tools.sampleTasks('eval', 1, 2, ToolsOptions.parse({}))[0].task);
    const calls = solveToolsTask(t).calls;
    script.push(...calls.map((c) => ok(null, { tool_calls: [{ id: 'x', type: 'function', function: { name: c.tool, arguments: JSON.stringify(c.arguments) } }] })));
    const r = await runEpisode({ definition: tools, task: t, options: { toolCalls: true }, policy: policy(), seed: 0 });
    expect(r).toMatchObject({ reward: 1, steps: calls.length, error: null });
    expect(requests[0].body.tools).toHaveLength(8);
    // The call goes back as the assistant's tool_calls and its result as a tool message with the call's id.
    expect((requests[1].body.messages as unknown[]).slice(-2)).toEqual([
      { role: 'assistant', content: '', tool_calls: [{ id: 'x', type: 'function', function: { name: calls[0].tool, arguments: JSON.stringify(calls[0].arguments) } }] },
      { role: 'tool', content: expect.stringContaining(`Result of ${calls[0].tool}`), tool_call_id: 'x' },
    ]);
  });

  it('`esopt episode --policy http:URL` plays through the client and prints the JSON result', async () => {
    script.push(status(503), ...moves.map((m) => ok(m)));
    const out: string[] = [];
    const err: string[] = [];
    process.env.ESOPT_TEST_TOKEN = 'cli-token';
    let code: number;
    try {
      code = await main(['episode', '--env', 'sudoku', '--task', JSON.stringify(task), '--policy', `http:${baseUrl}`, '--model', 'member-0-4', '--token-env', 'ESOPT_TEST_TOKEN', '--json'], {
        stdout: (t) => out.push(t),
        stderr: (t) => err.push(t),
        readStdin: async () => '',
      });
    } finally {
      // Test files share worker processes (vitest.config.ts): what one sets must not reach the next.
      delete process.env.ESOPT_TEST_TOKEN;
    }
    expect(err.join('')).toBe('');
    expect(code).toBe(0);
    const result = JSON.parse(out.join(''));
    expect(result).toMatchObject({ reward: 1, steps: 6, error: null });
    expect(result.transcript.filter((e: { kind: string }) => e.kind === 'action')).toHaveLength(6);
    expect(requests[1]).toMatchObject({ authorization: 'Bearer cli-token', body: { model: 'member-0-4' } });
  });
});
