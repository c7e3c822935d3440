/**
 * What ships, run as AWS runs it (trainer/dev/rehearsal/rehearse.ts): the functions built as `sst deploy` builds
 * them under aws-lambda-ric with their memory, /tmp and timeout from sst.config.ts, the Api behind a function
 * URL, the trainer box booted from the deploy's artifact by its own user data. Through it, as a user: the
 * dashboard and /docs with every asset (the Api refusing the boxes' token), one web iteration started with
 * `esopt runs start`, played by the Episode function in the Lambda build of Chromium against the box over pinned
 * TLS; iterations whose episodes a Python rollout agent, a Python OpenEnv server and an MCP server take part in
 * (the last on a task suite and instructions pushed with `esopt tasks push` / `instructions push --cloud`); a user's
 * web agent evaluated on their own app in every view and action grammar and on a pushed MiniWoB folder, each episode
 * replayable; and the box's log in its CloudWatch group. A bundle that lacks a file
 * it reads at run time fails here (test/cloud/sst-build.test.ts removes one on purpose).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveBookshopHttp, BOOKS } from '../../examples/mcp/server.ts';
import { StoredTranscript } from '../../functions/episode-transcript.ts';
import { keys } from '../../shared/keys.ts';
import { IterationManifest, RewardRecord, RunConfig } from '../../shared/schemas/index.ts';
import { readJson } from '../../shared/store/json.ts';
import { startRehearsal, type Rehearsal } from '../../trainer/dev/rehearsal/rehearse.ts';
import { apiFetch, evaluate, loadPages, pushInstructions, pushTaskFolder, pushTaskSuite, trainOneIteration } from '../../trainer/dev/rehearsal/scenarios.ts';
import { startTodoApp, startWebAgent } from '../../trainer/dev/rehearsal/web-agent.ts';
import { EpisodeReplay } from '../../shared/schemas/index.ts';
import { runtimeClientDir } from '../../trainer/dev/rehearsal/runtime-client.ts';

const ROOT = resolve(import.meta.dirname, '../..');
let stack: Rehearsal;

// The runtime client is installed on first use (trainer/dev/rehearsal/runtime-client.ts; .ci/run warms its cache).
beforeAll(() => runtimeClientDir(), 300_000);
beforeAll(async () => {
  // The box's npm ci is replaced by a link to this checkout's node_modules (minutes saved; listed in `replaced`).
  stack = await startRehearsal({ root: ROOT, replicas: 1, boxInstall: 'link', maxEnvironments: 2 });
}, 600_000);
afterAll(async () => {
  await stack?.close();
});

describe('the rehearsed stack', () => {
  it('serves the dashboard and /docs, and every asset they reference, from the bundled Api function', async () => {
    const pages = await loadPages({ apiUrl: stack.apiUrl });
    expect(pages.map((p) => p.path)).toEqual(expect.arrayContaining(['/', '/docs', '/assets/dashboard.js', '/assets/uplot.js', '/assets/uplot.css', '/docs/assets/swagger-ui-bundle.js', '/openapi.json']));
    expect(pages.filter((p) => p.status !== 200).map((p) => `${p.path} ${p.status}`)).toEqual([]);
    // Each answered by the runtime interface client in an execution environment of its own (not this process).
    expect(stack.functions.Api!.lambda.invocations.length).toBeGreaterThanOrEqual(pages.length);
    // Two tokens: the Api answers its own (ApiToken), and refuses the boxes' and the Episode function's (TrainerToken).
    const runs = (token: string) => fetch(`${stack.apiUrl}/runs`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.status);
    expect(stack.boxToken).not.toBe(stack.token);
    expect(await runs(stack.token)).toBe(200);
    expect(await runs(stack.boxToken)).toBe(401);
  });

  it('trains one web iteration started with `esopt runs start`: every episode counted, played in the Lambda Chromium', async () => {
    const report = await trainOneIteration({ apiUrl: stack.apiUrl, token: stack.token, log: () => {} }, 'web', 300_000);
    expect(report).toMatchObject({ state: 'finished', error: null, completed_iterations: 1, failed: 0, missing: 0 });
    expect(report.counted).toBe(report.expected);
    expect(report.completion_tokens).toBeGreaterThan(0);
    const episodes = stack.functions.Episode!.lambda.invocations;
    expect(episodes.length).toBeGreaterThanOrEqual(report.expected!);
    expect(episodes.filter((i) => !i.ok)).toEqual([]);
    // The browser was inflated into the function's own /tmp volume, within its memory.
    const { memoryMb, ephemeralStorageMb } = stack.functions.Episode!.definition;
    expect(Math.max(...episodes.map((i) => i.tmpUsedMb))).toBeGreaterThan(50);
    expect(Math.max(...episodes.map((i) => i.tmpUsedMb))).toBeLessThanOrEqual(ephemeralStorageMb);
    expect(Math.max(...episodes.map((i) => i.peakMemoryMb))).toBeLessThan(memoryMb);
  }, 300_000);

  it('trains one iteration whose episodes a Python agent plays as the rollout, calling back the box over pinned TLS', async () => {
    const agent: ChildProcess = spawn('python3', [resolve(ROOT, 'examples/rollout/agent.py'), '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const port = await new Promise<string>((done) => agent.stdout!.once('data', (d: Buffer) => done(d.toString().trim())));
      const report = await trainOneIteration({ apiUrl: stack.apiUrl, token: stack.token, log: () => {} }, { name: 'rollout', options: { url: `http://127.0.0.1:${port}/rollout` } }, 300_000);
      expect(report, JSON.stringify(report)).toMatchObject({ state: 'finished', error: null, completed_iterations: 1, failed: 0, missing: 0 });
      expect(report.counted).toBe(report.expected);
      // the tokens the agent's calls were served, as the box counted them by the rollout's key
      expect(report.completion_tokens).toBeGreaterThan(0);
    } finally {
      agent.kill();
    }
  }, 300_000);

  it('trains one iteration against the Python OpenEnv reference server, its key stored by the Api and sent by the Episode function', async () => {
    const key = `oe-${randomBytes(12).toString('hex')}`;
    const server: ChildProcess = spawn('python3', [resolve(ROOT, 'examples/openenv/server.py'), '--port', '0', '--key-env', 'OPENENV_KEY'], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, OPENENV_KEY: key } });
    try {
      const port = await new Promise<string>((done) => server.stdout!.once('data', (d: Buffer) => done(d.toString().trim())));
      const options = { url: `http://127.0.0.1:${port}`, horizon: 2, action: { as: 'json' } };
      const report = await trainOneIteration({ apiUrl: stack.apiUrl, token: stack.token, log: () => {} }, { name: 'openenv', options }, 300_000, {}, key);
      expect(report, JSON.stringify(report)).toMatchObject({ state: 'finished', error: null, completed_iterations: 1, failed: 0, missing: 0 });
      expect(report.counted).toBe(report.expected);
      // Without the key the server refuses every call: the episodes fail, saying so, and the run does not count them.
      const keyless = await trainOneIteration({ apiUrl: stack.apiUrl, token: stack.token, log: () => {} }, { name: 'openenv', options }, 300_000);
      expect(keyless.counted, JSON.stringify(keyless)).toBe(0);
      expect(keyless.top_error).toMatch(/HTTP 401|401/);
    } finally {
      server.kill();
    }
  }, 600_000);

  it('trains one tools iteration on MCP tools over HTTP, its tasks a pushed suite, under pushed instructions that reach every system message', async () => {
    const access = { apiUrl: stack.apiUrl, token: stack.token, log: () => {}, bucketEnv: stack.bucketEnv };
    // The user's MCP server (examples/mcp/server.ts), counting what reaches it.
    const mcp: Server = await serveBookshopHttp(0);
    let mcpRequests = 0;
    mcp.on('request', () => mcpRequests++);
    try {
      // A suite of MCP tasks, one verifier of each kind, pushed to the bucket as a user pushes it.
      const tasks = BOOKS.flatMap((b) => [
        { kind: 'mcp', question: `What does ${b.title} cost, in US cents?`, verifier: { kind: 'answer', answer: b.priceCents } },
        { kind: 'mcp', question: `How many copies of ${b.title} are in stock?`, verifier: { kind: 'tool', tool: 'grade', arguments: { expected: b.stock } } },
        { kind: 'mcp', question: `Who wrote ${b.title}? Answer {"author": …}.`, verifier: { kind: 'predicate', predicate: { path: '/author', equals: b.author } } },
      ]);
      const suite = await pushTaskSuite(access, 'bookshop', 'tools', tasks);
      expect(suite).toMatchObject({ name: 'bookshop', environment: 'tools', tasks: tasks.length });
      const system = 'You are the clerk of a small bookshop: look a book up before you answer.\n\n{{environment}}\n\nAnswer with the number alone.';
      const skill = { name: 'shelves', text: "Search by the title's rarest word first." };
      const instructions = await pushInstructions(access, 'clerk', { system, skills: [skill] });
      const url = `http://127.0.0.1:${(mcp.address() as AddressInfo).port}/mcp`;
      const environment = { name: 'tools' as const, options: { horizon: 2, mcp: { servers: [{ name: 'shop', url }], instructions: 'You work at a bookshop.' } } };
      const report = await trainOneIteration(access, environment, 300_000, { tasks: { suite: 'bookshop', seed: 1, trainPerIteration: 2, evalCount: 1 }, instructions: 'clerk' });
      expect(report, JSON.stringify(report)).toMatchObject({ state: 'finished', error: null, completed_iterations: 1, failed: 0, missing: 0 });
      expect(report.counted).toBe(report.expected);
      // Every episode connected to the server and listed its tools (initialize, initialized, tools/list at least).
      const records = await Promise.all((await stack.store.list(keys.run(report.run))).filter((k) => k.includes('/rewards/')).map(async (k) => (await readJson(stack.store, k, RewardRecord))!));
      expect(records.length).toBeGreaterThan(report.expected!);
      expect(records.filter((r) => r.error !== null)).toEqual([]);
      expect(mcpRequests).toBeGreaterThanOrEqual(3 * records.length);
      // Every task came from the pushed suite, pinned by the Api bundle at `runs start` and recorded by the box.
      expect(records.every((r) => r.task.startsWith('bookshop-'))).toBe(true);
      const pinned = { suite: { name: 'bookshop', manifest: suite.manifestSha256 }, instructions: { name: 'clerk', manifest: instructions.manifestSha256 } };
      const config = await readJson(stack.store, keys.config(report.run), RunConfig);
      expect({ suite: config?.tasks.suite, instructions: config?.instructions }).toEqual(pinned);
      expect(await readJson(stack.store, keys.manifest(report.run, 0), IterationManifest)).toMatchObject(pinned);
      // The base model's evaluation episode stored its transcript: its system message is the pushed text around the
      // environment's own prompt (the MCP server's tools), then the skill, as the Episode function composed it.
      const transcripts = (await stack.store.list(keys.run(report.run))).filter((k) => k.includes('/transcripts/'));
      expect(transcripts.length).toBeGreaterThan(0);
      for (const key of transcripts) {
        const [first] = (await readJson(stack.store, key, StoredTranscript))!.entries;
        expect(first).toMatchObject({ kind: 'system', instructions: pinned.instructions });
        expect(first!.text).toMatch(/^You are the clerk of a small bookshop: look a book up before you answer\.\n\n/);
        expect(first!.text).toContain('You work at a bookshop.');
        expect(first!.text).toContain('search_books');
        expect(first!.text).not.toContain('{{environment}}');
        expect(first!.text).toMatch(/Answer with the number alone\.\n\n## Skill: shelves\n\nSearch by the title's rarest word first\.$/);
      }
    } finally {
      await new Promise<void>((done) => mcp.close(() => done()));
    }
  }, 300_000);

  it("evaluates a user's web agent on their own app in every view and grammar, and on a pushed MiniWoB folder, each episode replayable", async () => {
    const access = { apiUrl: stack.apiUrl, token: stack.token, log: () => {}, bucketEnv: stack.bucketEnv };
    const key = `app-${randomBytes(12).toString('hex')}`;
    const app = await startTodoApp(key);
    const agent = await startWebAgent();
    const episodes = stack.functions.Episode!.lambda.invocations;
    try {
      const addMilk = { start: '/todos', goal: 'Add a to-do called "milk".', check: { elements: { items: '#items li' }, fetch: '/api/state', predicate: { all: [{ path: '/elements/items/text', equals: 'milk' }, { path: '/fetched/json/todos', includes: 'milk' }] } } };
      const request = (options: Record<string, unknown>, tasks: unknown) =>
        ({ model: { kind: 'external', baseUrl: agent.baseUrl, model: agent.model }, environment: { name: 'web', options: { backend: 'chromium', actionTimeoutMs: 15_000, ...options } }, tasks, episodes: 1, concurrency: 1, timeoutMs: 120_000, budget: { maxCostUsd: 1 } }) as Parameters<typeof evaluate>[1];
      const VIEWS: Record<string, unknown>[] = [{}, { observation: ['axtree'], actions: 'browsergym' }, { observation: ['text', 'axtree'], actions: 'tools' }, { observation: ['screenshot'], markIds: true, actions: 'coordinates' }];
      for (const view of VIEWS) {
        app.todos.length = 0;
        const before = episodes.length;
        const done = await evaluate(access, request({ app: { url: app.url, horizon: 6 }, ...view }, { tasks: [{ id: 'add-milk', task: addMilk }] }), key);
        expect(done.episodes.map((e) => [e.success, e.error]), JSON.stringify(view)).toEqual([[true, null]]);
        expect(app.todos).toEqual(['milk']);
        // The replay a person opens: every step with its screenshot, served by the Api bundle from the bucket.
        const replay = EpisodeReplay.parse((await apiFetch(access, `/evaluations/${done.id}/episodes/0`)).json);
        expect(replay.steps.length).toBeGreaterThanOrEqual(3);
        const frame = await apiFetch(access, replay.steps[0]!.frame!);
        expect([frame.status, frame.type, Buffer.from(frame.bytes.subarray(1, 4)).toString()]).toEqual([200, 'image/png', 'PNG']);
        if ((view.observation as string[] | undefined)?.includes('screenshot')) {
          const { memoryMb } = stack.functions.Episode!.definition;
          const peak = Math.max(...episodes.slice(before).map((i) => i.peakMemoryMb));
          expect(peak).toBeLessThan(memoryMb);
          console.info(`rehearsal: a screenshot-observation web episode peaked at ${peak} MB of the Episode function's ${memoryMb} MB`);
        }
      }
      // Every request the app got carried the evaluation's key, sent by the Episode function to the app's origin only.
      expect(app.refused).toBe(0);
      expect(agent.calls.pictures).toBeGreaterThan(0);
      // A MiniWoB-protocol folder pushed as a user pushes it, pinned by the Api, fetched by the Episode function by hash.
      const folder = await pushTaskFolder(access, 'protocol', resolve(ROOT, 'test/fixtures/miniwob-protocol'));
      const miniwob = await evaluate(access, request({ miniwob: { folder: 'protocol', tasks: ['click-word'] } }, { split: 'eval', count: 1, seed: 5 }));
      expect(miniwob.episodes.map((e) => [e.success, e.error])).toEqual([[true, null]]);
      expect((miniwob.request.environment.options as { miniwob: { folder: unknown } }).miniwob.folder).toEqual({ name: 'protocol', manifest: folder.manifestSha256 });
      expect(episodes.filter((i) => !i.ok)).toEqual([]);
    } finally {
      await app.close();
      await agent.close();
    }
  }, 600_000);

  it("ships the trainer box's service log to its CloudWatch group (esopt cloud logs box), the token never in it", async () => {
    // the service puts its buffered lines every 2 s
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const events = stack.logs.events('/esopt/rehearsal/boxes');
    expect(new Set(events.map((e) => e.logStreamName))).toEqual(new Set(['trainer']));
    expect(events.some((e) => /"name":"esopt-trainer-box"/.test(e.message))).toBe(true);
    // Neither token: the box holds the TrainerToken (from SSM), and the API's never reaches it.
    expect(events.filter((e) => e.message.includes(stack.boxToken) || e.message.includes(stack.token))).toEqual([]);
  });
});
