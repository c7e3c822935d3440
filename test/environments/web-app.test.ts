/**
 * A user's own web app in real Chromium: a small to-do app of this test's own on loopback (an embedded run's
 * outbound policy allows loopback; a deployed stack's refuses it). esopt makes every request to the app's origin
 * itself (the key added, the page's scripts never seeing it), blocks everything else — also after a redirect —
 * and judges the end from the task's declarative check: URL, elements, the app's state endpoint.
 */
import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage, Policy } from '../../shared/ports/policy.ts';
import { runEpisode } from '../../environments/episode-runner.ts';
import { EMBEDDED_OUTBOUND, PUBLIC_ONLY } from '../../environments/outbound/address-policy.ts';
import { web } from '../../environments/web/definition.ts';
import { closeWebRuntime } from '../../environments/web/runtime.ts';
import type { EnvironmentContext } from '../../environments/environment.ts';

const chromium = existsSync('/usr/bin/chromium') || Boolean(process.env.ESOPT_CHROMIUM);
const KEY = 'app-key-5f1c0ffee';

interface Listening {
  server: Server;
  origin: string;
  hits: string[];
}
async function listen(handle: (req: IncomingMessage, res: ServerResponse, body: string) => void, host = '127.0.0.1'): Promise<Listening> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      hits.push(`${req.method} ${req.url} ${req.headers.authorization ?? '-'} ${req.headers.cookie ?? '-'}`);
      handle(req, res, body);
    });
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  return { server, origin: `http://${host}:${(server.address() as AddressInfo).port}`, hits };
}

let app: Listening;
let elsewhere: Listening;
let todos: string[] = [];

function page(res: ServerResponse, html: string, headers: Record<string, string | string[]> = {}) {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', ...headers });
  res.end(`<!doctype html><html><head><title>Todos</title></head><body>${html}</body></html>`);
}

beforeAll(async () => {
  elsewhere = await listen((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/javascript' });
    res.end('document.title = "pwned";');
  }, '127.0.0.2');
  app = await listen((req, res, body) => {
    const url = new URL(req.url!, 'http://x');
    // The app wants the evaluation's key on every request (a staging app behind a token).
    if (req.headers.authorization !== `Bearer ${KEY}`) {
      res.writeHead(401, { 'content-type': 'text/plain' });
      return res.end('no key');
    }
    if (url.pathname === '/todos' && req.method === 'GET') {
      const cookies = req.headers.cookie ?? '';
      // Two cookies in one answer: each must reach the browser's jar apart.
      const set: Record<string, string[]> = cookies.includes('sid=') ? {} : { 'set-cookie': ['sid=abc; Path=/', 'theme=dark; Path=/'] };
      return page(res, `<h1>Todos</h1><form method="post" action="/todos"><input name="title" aria-label="New todo"><button type="submit">Add</button></form>
<ul id="items">${todos.map((t) => `<li>${t}</li>`).join('')}</ul><p id="greeting">…</p>
<script>fetch('/api/hello').then(r => r.json()).then(j => { document.getElementById('greeting').textContent = j.hello; });</script>`, set);
    }
    if (url.pathname === '/todos' && req.method === 'POST') {
      todos.push(new URLSearchParams(body).get('title') ?? '');
      res.writeHead(303, { location: '/todos' });
      return res.end();
    }
    if (url.pathname === '/api/hello') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ hello: (req.headers.cookie ?? '').includes('theme=dark') ? 'dark mode' : 'no cookie' }));
    }
    if (url.pathname === '/api/state') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ todos }));
    }
    if (url.pathname === '/go') {
      res.writeHead(302, { location: '/todos?from=go' });
      return res.end();
    }
    if (url.pathname === '/leave') {
      res.writeHead(302, { location: `${elsewhere.origin}/away` });
      return res.end();
    }
    if (url.pathname === '/foreign') return page(res, `<p>hi</p><script src="${elsewhere.origin}/x.js"></script>`);
    if (url.pathname === '/huge') return page(res, `<p>${'x'.repeat(300_000)}</p>`);
    if (url.pathname === '/hang') return; // never answers
    res.writeHead(404);
    res.end();
  });
});
afterAll(async () => {
  await closeWebRuntime();
  for (const l of [app, elsewhere]) l?.server.closeAllConnections();
  for (const l of [app, elsewhere]) await new Promise((r) => l?.server.close(r));
});

const embedded: EnvironmentContext = { outbound: EMBEDDED_OUTBOUND, allowCommands: true, endpointKey: KEY };
const options = (extra: Record<string, unknown> = {}) => web.optionsSchema.parse({ backend: 'chromium', actionTimeoutMs: 8_000, app: { url: app.origin, horizon: 6, ...extra } });
const addMilk = {
  start: '/todos',
  goal: 'Add a to-do called "milk".',
  check: {
    elements: { items: '#items li', greeting: '#greeting' },
    fetch: '/api/state',
    predicate: {
      all: [
        { path: '/url', matches: '/todos$' },
        { path: '/elements/items/count', equals: 1 },
        { path: '/elements/items/text', equals: 'milk' },
        { path: '/fetched/json/todos', includes: 'milk' },
      ],
    },
  },
};

const last = (m: ChatMessage[]) => String(m.at(-1)?.content ?? '');
const reply = (text: string) => ({ text, tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 });
/** Types the to-do into the box and presses Add, then says done: what a competent agent does. */
const addsMilk: Policy = {
  async act(messages, { step }) {
    const obs = last(messages);
    if (step === 0) return reply(`type ${/\[(\d+)\] textbox/.exec(obs)![1]} "milk"`);
    if (step === 1) return reply(`click ${/\[(\d+)\] button "Add"/.exec(obs)![1]}`);
    return reply('done');
  },
};
const saysDone: Policy = { async act() { return reply('done'); } };

describe.skipIf(!chromium)("a user's own web app in Chromium", () => {
  it('plays a task to esopt’s own judgement: proxied requests with the key, cookies kept, the state endpoint read', async () => {
    todos = [];
    const result = await runEpisode({ definition: web, task: addMilk, options: options(), policy: addsMilk, seed: 1, context: embedded });
    expect(result.error).toBeNull();
    expect(result.reward).toBe(1);
    const end = result.transcript.at(-1)!;
    expect(end.kind === 'observation' && end.info).toMatchObject({ success: true, checked: { elements: { items: { count: 1, text: 'milk' } }, fetched: { status: 200, json: { todos: ['milk'] } } } });
    // The page's own script ran through the proxy with both cookies the app set in one answer.
    expect(end.kind === 'observation' && (end.info as { checked: { elements: { greeting: { text: string } } } }).checked.elements.greeting.text).toBe('dark mode');
    // Every request to the app carried the key (esopt added it); the form post came with the session cookie.
    expect(app.hits.every((h) => h.includes(`Bearer ${KEY}`))).toBe(true);
    expect(app.hits.some((h) => h.startsWith('POST /todos') && h.includes('sid=abc'))).toBe(true);
    // The observations the model saw never held the key.
    expect(JSON.stringify(result.transcript)).not.toContain(KEY);
  }, 90_000);

  it('judges an unfinished task a failure, with the document it judged', async () => {
    todos = [];
    const result = await runEpisode({ definition: web, task: addMilk, options: options(), policy: saysDone, seed: 1, context: embedded });
    expect(result.error).toBeNull();
    expect(result.reward).toBe(0);
    const end = result.transcript.at(-1)!;
    expect(end.kind === 'observation' && end.info).toMatchObject({ success: false, checked: { elements: { items: { count: 0 } }, fetched: { json: { todos: [] } } } });
  }, 60_000);

  it('blocks other origins, also behind a redirect from the app', async () => {
    const before = elsewhere.hits.length;
    const foreign = { ...addMilk, start: '/foreign', check: { predicate: { path: '/title', equals: 'Todos' } } };
    const result = await runEpisode({ definition: web, task: foreign, options: options(), policy: saysDone, seed: 1, context: embedded });
    expect(result.reward).toBe(1); // the foreign script never ran: the title is the app's own
    const end = result.transcript.at(-1)!;
    expect(end.kind === 'observation' && end.info?.blocked).toBeGreaterThan(0);
    // A redirect to another origin: the browser's next request is refused, the page never loads.
    const leave = { ...addMilk, start: '/leave', check: { elements: { body: 'body' }, predicate: { path: '/elements/body/text', matches: 'pwned' } } };
    const left = await runEpisode({ definition: web, task: leave, options: options(), policy: saysDone, seed: 1, context: embedded });
    expect(left.reward).toBe(0);
    expect(elsewhere.hits.length).toBe(before);
  }, 60_000);

  it('follows a redirect within the app to the URL the app meant, the next request routed (and keyed) again', async () => {
    app.hits.length = 0;
    const go = { ...addMilk, start: '/go', check: { predicate: { path: '/url', matches: '/todos\\?from=go$' } } };
    const result = await runEpisode({ definition: web, task: go, options: options(), policy: saysDone, seed: 1, context: embedded });
    expect(result.reward).toBe(1);
    expect(app.hits.filter((h) => h.startsWith('GET /todos?from=go'))).toHaveLength(1);
    expect(app.hits.every((h) => h.includes(`Bearer ${KEY}`))).toBe(true);
  }, 60_000);

  it('refuses what the policy or the options do not allow, before a browser opens, with the reason', async () => {
    // A deployed stack's policy: no loopback app.
    await expect(web.create(addMilk, options(), { outbound: PUBLIC_ONLY, allowCommands: false })).rejects.toThrow(/loopback address, not allowed here|only for a server on this machine/);
    // A start outside the app's origins.
    await expect(web.create({ ...addMilk, start: `${elsewhere.origin}/x` }, options(), embedded)).rejects.toThrow(/not the app's origin/);
    // Tasks on an app are written, not generated.
    expect(() => web.sampleTasks('train', 2, 1, options())).toThrow(/written, not generated/);
    // A bad predicate or selector: a schema error with its path / a clear error at the end.
    expect(web.taskSchema.safeParse({ ...addMilk, check: { predicate: { path: '/x', matches: '(?=a)' } } }).success).toBe(false);
    const badSelector = { ...addMilk, check: { elements: { x: 'li[' }, predicate: { path: '/title', exists: true } } };
    const result = await runEpisode({ definition: web, task: badSelector, options: options(), policy: saysDone, seed: 1, context: embedded });
    expect(result.transcript.at(-1)).toMatchObject({ info: { error: expect.stringMatching(/selector for x is not valid CSS/) } });
  }, 60_000);

  it('ends an episode on a page past the size cap or one that never answers, saying why', async () => {
    const huge = await runEpisode({ definition: web, task: { ...addMilk, start: '/huge' }, options: options({ maxResponseBytes: 100_000 }), policy: saysDone, seed: 1, context: embedded });
    expect(huge.reward).toBe(0);
    expect(huge.error ?? '').not.toBe('');
    const hang = await runEpisode({ definition: web, task: { ...addMilk, start: '/hang' }, options: web.optionsSchema.parse({ backend: 'chromium', actionTimeoutMs: 1_500, app: { url: app.origin } }), policy: saysDone, seed: 1, context: embedded });
    expect(hang.reward).toBe(0);
    expect(hang.error).toMatch(/took longer than|timed out|Timeout/i);
  }, 60_000);
});
