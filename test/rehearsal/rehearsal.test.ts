/**
 * What ships, run as AWS runs it (trainer/dev/rehearsal/rehearse.ts): the functions built as `sst deploy` builds
 * them under aws-lambda-ric with their memory, /tmp and timeout from sst.config.ts, the Api behind a function
 * URL, the trainer box booted from the deploy's artifact by its own user data. Through it, as a user: the
 * dashboard and /docs with every asset, and one web iteration started with `esopt runs start`, played by the
 * Episode function in the Lambda build of Chromium against the box over pinned TLS, and the box's log in its
 * CloudWatch group. A bundle that lacks a file
 * it reads at run time fails here (test/cloud/sst-build.test.ts removes one on purpose).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { startRehearsal, type Rehearsal } from '../../trainer/dev/rehearsal/rehearse.ts';
import { loadPages, trainOneIteration } from '../../trainer/dev/rehearsal/scenarios.ts';
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

  it("ships the trainer box's service log to its CloudWatch group (esopt cloud logs box), the token never in it", async () => {
    // the service puts its buffered lines every 2 s
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const events = stack.logs.events('/esopt/rehearsal/boxes');
    expect(new Set(events.map((e) => e.logStreamName))).toEqual(new Set(['trainer']));
    expect(events.some((e) => /"name":"esopt-trainer-box"/.test(e.message))).toBe(true);
    expect(events.filter((e) => e.message.includes(stack.token))).toEqual([]);
  });
});
