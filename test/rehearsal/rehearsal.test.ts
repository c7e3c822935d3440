/**
 * What ships, run as AWS runs it (trainer/dev/rehearsal/rehearse.ts): the functions built as `sst deploy` builds
 * them under aws-lambda-ric with their memory, /tmp and timeout from sst.config.ts, the Api behind a function
 * URL, the trainer box booted from the deploy's artifact by its own user data. Through it, as a user: the
 * dashboard and /docs with every asset (the Api refusing the boxes' token), one web iteration started with
 * `esopt runs start`, played by the Episode function in the Lambda build of Chromium against the box over pinned
 * TLS; iterations whose episodes a Python rollout agent, a Python OpenEnv server and an MCP server take part in
 * (the last on a task suite and instructions pushed with `esopt tasks push` / `instructions push --cloud`); and
 * the box's log in its CloudWatch group. A bundle that lacks a file
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
import { loadPages, pushInstructions, pushTaskSuite, trainOneIteration } from '../../trainer/dev/rehearsal/scenarios.ts';
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
