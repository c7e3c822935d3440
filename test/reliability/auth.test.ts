/**
 * Bearer auth on every route of the API (read from its OpenAPI document) and of the inference server
 * (read from its route table): refused without the exact token — missing, wrong, one character short
 * or long, another case, another scheme, in the query or another header — with 401 and nothing
 * written; health, docs and the dashboard shell open as designed. Every check goes through
 * shared/bearer-token.ts. And a real training run started through the API leaves neither the API
 * token nor the inference server's token in its log lines or in any object it wrote to the store.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Writable } from 'node:stream';
import { Hono } from 'hono';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask } from '../../shared/es.ts';
import { bearerToken, tokenMatches } from '../../shared/bearer-token.ts';
import { CostPrices } from '../../shared/cost.ts';
import { ApiError } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { createApiApp } from '../../functions/http-api/app.ts';
import { storeQueueLaunchers } from '../../functions/http-api/queued-launchers.ts';
import { MemorySecretStore } from '../cloud/helpers/memory-secrets.ts';
import { InProcessModelExports } from '../../trainer/jobs/local-model-exports.ts';
import { LocalRunLauncher } from '../../trainer/jobs/local-run-launcher.ts';
import type { Engine } from '../../trainer/engine/engine.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { createInferenceApp } from '../../trainer/serving/app.ts';
import { InferenceService } from '../../trainer/serving/service.ts';
import { tinyRunConfig } from '../api/helpers.ts';
import { apiOverTempStore, operationsOf, pathWith, type FuzzedApi, type Operation } from './helpers/api-app.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const TOKEN = 'Api-Token-3f9c2a7be1d04c55';

/** Every way of not presenting exactly TOKEN as a bearer token (headers; `null` = no Authorization). */
const REFUSED: Array<[string, Record<string, string>]> = [
  ['no header', {}],
  ['empty header', { authorization: '' }],
  ['scheme only', { authorization: 'Bearer' }],
  ['scheme and space', { authorization: 'Bearer ' }],
  ['wrong token', { authorization: 'Bearer not-the-token-at-all' }],
  ['one character short', { authorization: `Bearer ${TOKEN.slice(0, -1)}` }],
  ['one character long', { authorization: `Bearer ${TOKEN}x` }],
  ['same length, last character differs', { authorization: `Bearer ${TOKEN.slice(0, -1)}6` }],
  ['token in upper case', { authorization: `Bearer ${TOKEN.toUpperCase()}` }],
  ['token in lower case', { authorization: `Bearer ${TOKEN.toLowerCase()}` }],
  ['token without scheme', { authorization: TOKEN }],
  ['Basic scheme', { authorization: `Basic ${Buffer.from(`user:${TOKEN}`).toString('base64')}` }],
  ['Token scheme', { authorization: `Token ${TOKEN}` }],
  ['two tokens', { authorization: `Bearer ${TOKEN} ${TOKEN}` }],
  ['token then comma', { authorization: `Bearer ${TOKEN}, Bearer x` }],
  ['in X-Api-Key', { 'x-api-key': TOKEN }],
  ['in a cookie', { cookie: `token=${TOKEN}` }],
];

/** The auth scheme is case-insensitive (RFC 9110 §11.1); the token is not. */
const ACCEPTED: Array<[string, Record<string, string>]> = [
  ['Bearer', { authorization: `Bearer ${TOKEN}` }],
  ['bearer', { authorization: `bearer ${TOKEN}` }],
  ['BEARER', { authorization: `BEARER ${TOKEN}` }],
];

describe('API auth', () => {
  let api: FuzzedApi;
  let ops: Operation[];
  let run: string;
  let evaluation: string;

  beforeAll(async () => {
    api = apiOverTempStore(TOKEN);
    ops = await operationsOf(api.app);
    const created = await api.app.request('/runs', { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(tinyRunConfig()) });
    run = ((await created.json()) as { id: string }).id;
    evaluation = 'no-such-eval';
  });
  afterAll(() => api?.dispose());

  const urlOf = (op: Operation) => pathWith(op, { id: op.path.startsWith('/evaluations') ? evaluation : run, index: '0' });

  it('marks every documented operation but the public ones as secured', () => {
    const open = ops.filter((o) => !o.secured).map((o) => `${o.method} ${o.path}`);
    expect(open).toEqual([]);
    expect(ops.length).toBeGreaterThanOrEqual(11);
  });

  it('refuses every secured operation without exactly the token: 401, WWW-Authenticate, nothing written', async () => {
    const before = await api.store.list('');
    for (const op of ops) {
      for (const [how, headers] of REFUSED) {
        for (const query of ['', `?token=${TOKEN}`, `?access_token=${TOKEN}`]) {
          const res = await api.app.request(urlOf(op) + query, { method: op.method, headers: { 'content-type': 'application/json', ...headers }, body: op.method === 'POST' ? JSON.stringify(tinyRunConfig()) : undefined });
          expect(res.status, `${op.method} ${op.path} with ${how}${query}`).toBe(401);
          expect(res.headers.get('www-authenticate')).toBe('Bearer');
          expect(ApiError.parse(await res.json()).error.code).toBe('unauthorized');
        }
      }
    }
    expect(await api.store.list('')).toEqual(before);
  });

  it('lets the token through with any case of the scheme', async () => {
    for (const op of ops.filter((o) => o.method === 'GET' && !o.path.endsWith('/events'))) {
      for (const [how, headers] of ACCEPTED) {
        const res = await api.app.request(urlOf(op), { headers });
        expect(res.status, `${op.method} ${op.path} with ${how}`).not.toBe(401);
      }
    }
  });

  it('keeps health, the OpenAPI document, the docs and the dashboard shell open', async () => {
    for (const path of ['/healthz', '/openapi.json', '/docs', '/', '/assets/dashboard.js', '/assets/uplot.css']) {
      expect((await api.app.request(path)).status, path).toBe(200);
    }
    // …and only those: a look-alike path is not public.
    for (const path of ['/healthz/', '/healthz/x', '/docs/../runs', '/openapi.json/../runs', '/assets/../runs', '/assets/x/../../runs']) {
      expect((await api.app.request(path)).status, path).not.toBe(200);
    }
  });

  it('logs no token: not the right one, not a wrong one, not one in the query string', async () => {
    const wrong = 'Wrong-Token-c0ffee5e1f';
    for (const op of ops.filter((o) => !o.path.endsWith('/events'))) {
      await api.app.request(`${urlOf(op)}?token=${TOKEN}`, { method: op.method, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: op.method === 'POST' ? '{"bad":' : undefined });
      await api.app.request(`${urlOf(op)}?token=${wrong}`, { method: op.method, headers: { authorization: `Bearer ${wrong}` } });
    }
    expect(api.logs.length).toBeGreaterThan(2 * (ops.length - 1));
    for (const line of api.logs) {
      expect(line).not.toContain(TOKEN);
      expect(line).not.toContain(wrong);
      expect(line.toLowerCase()).not.toContain('authorization');
    }
  });
});

describe('inference server auth', () => {
  let engine: Engine;
  let app: Hono;

  beforeAll(async () => {
    engine = await createEngine({ model: { preset: 'tiny', seed: 0 }, mode: 'lowrank' });
    const service = new InferenceService(engine);
    service.setPopulation({ runSeed: 1, iteration: 0, sigma: 0.05, rank: 1, members: ask({ population: 2, antithetic: true }) });
    app = createInferenceApp(service, { token: TOKEN, requestTimeoutMs: 30_000, defaultMaxTokens: 2, contextPolicy: 'error' });
  });
  afterAll(async () => {
    await engine?.close();
  });

  const rolloutBody = JSON.stringify({ model: 'member-0-1', expiresInMs: 60_000 });
  const body = JSON.stringify({ model: 'member-0-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
  /** Every route the app serves, from hono's own table. */
  const routes = () => [...new Set(app.routes.filter((r) => r.method !== 'ALL').map((r) => `${r.method} ${r.path}`))];

  it('refuses every route but /healthz without exactly the token, and serves them with it', async () => {
    expect(routes()).toEqual(expect.arrayContaining(['GET /healthz', 'GET /metrics', 'GET /v1/models', 'POST /v1/chat/completions', 'POST /v1/rollouts', 'GET /v1/rollouts/:id', 'DELETE /v1/rollouts/:id']));
    // A valid request for each route: its own body, and a rollout key id issued just before (one per use).
    const issueRollout = async () => {
      const res = await app.request('/v1/rollouts', { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: rolloutBody });
      expect(res.status).toBe(201);
      return ((await res.json()) as { id: string }).id;
    };
    const served: Record<string, number> = { 'POST /v1/rollouts': 201, 'DELETE /v1/rollouts/:id': 204 };
    for (const route of routes()) {
      const [method, template] = route.split(' ');
      const init = (headers: Record<string, string>) => ({ method, headers: { 'content-type': 'application/json', ...headers }, body: method === 'POST' ? (template === '/v1/rollouts' ? rolloutBody : body) : undefined });
      const pathOf = async () => (template.includes(':id') ? template.replace(':id', await issueRollout()) : template);
      const path = await pathOf();
      if (path === '/healthz') {
        expect((await app.request(path, init({}))).status).toBe(200);
        continue;
      }
      for (const [how, headers] of REFUSED) {
        const res = await app.request(`${path}?api_key=${TOKEN}`, init(headers));
        expect(res.status, `${route} with ${how}`).toBe(401);
        expect(res.headers.get('www-authenticate')).toBe('Bearer');
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
      }
      for (const [how, headers] of ACCEPTED) expect((await app.request(await pathOf(), init(headers))).status, `${route} with ${how}`).toBe(served[route] ?? 200);
    }
    // An unknown route is no way around it either.
    expect((await app.request('/v1/completions', { method: 'POST', body })).status).toBe(401);
  }, 60_000);
});

describe('one constant-time check for every bearer token', () => {
  const roots = ['shared', 'functions', 'environments', 'trainer'];
  const sources = roots.flatMap((root) =>
    (readdirSync(root, { recursive: true }) as string[]).filter((f) => /\.(ts|js|mjs)$/.test(f) && !f.includes('node_modules')).map((f) => join(root, f)),
  );

  it('is the only comparison: every file reading an Authorization header uses shared/bearer-token.ts', () => {
    const readers = sources.filter((f) => /header\(\s*['"]authorization['"]\s*\)|headers\.get\(\s*['"]authorization['"]\s*\)|headers\.authorization\b/i.test(readFileSync(f, 'utf8')));
    expect(readers.length).toBeGreaterThanOrEqual(2);
    for (const file of readers) {
      const text = readFileSync(file, 'utf8');
      expect(text, file).toMatch(/from '[./]*\/?(shared\/)?bearer-token\.ts'/);
      // It compares itself, or asks a TokenCheck (a box's rotating tokens, trainer/serving/token-follower.ts).
      expect(text, file).toMatch(/tokenMatches\(|\.accepts\(/);
    }
    // Every TokenCheck compares with tokenMatches, or hands over to one that does (AcceptedTokens).
    const checks = sources.filter((f) => /\baccepts(\(given: string|:\s*async)/.test(readFileSync(f, 'utf8')));
    expect(checks.length).toBeGreaterThanOrEqual(2);
    for (const file of checks) expect(readFileSync(file, 'utf8'), file).toMatch(/tokenMatches\(|new AcceptedTokens\(/);
    const timingSafe = sources.filter((f) => readFileSync(f, 'utf8').includes('timingSafeEqual'));
    expect(timingSafe.map((f) => relative('.', f))).toEqual(['shared/bearer-token.ts']);
  });

  it('compares digests, so tokens of any length are compared without throwing', () => {
    expect(tokenMatches(TOKEN, TOKEN)).toBe(true);
    for (const given of ['', 'x', TOKEN.slice(0, -1), `${TOKEN}x`, TOKEN.toUpperCase(), 'é'.repeat(40), 'x'.repeat(100_000)]) expect(tokenMatches(given, TOKEN)).toBe(false);
    expect(bearerToken(`Bearer ${TOKEN}`)).toBe(TOKEN);
    for (const header of [undefined, '', 'Bearer', `Basic ${TOKEN}`, `Bearer ${TOKEN} more`, `Bearer\t${TOKEN}`]) expect(bearerToken(header)).toBeNull();
  });
});

describe('tokens in records', () => {
  const INFERENCE_TOKEN = 'Inference-Token-9b8e7d6c5a4f';
  const ENDPOINT_KEY = 'sk-endpoint-key-77aa31';

  it('a training run and a keyed evaluation request through the API write no token or key to the log or any object in the store', async () => {
    const fuzz = apiOverTempStore(TOKEN);
    const logs: string[] = [];
    const log = pino({ level: 'debug' }, new Writable({ write: (chunk, _e, done) => (logs.push(String(chunk)), done()) }));
    const store = new FsObjectStore(fuzz.root);
    const secrets = new MemorySecretStore();
    const runs = new LocalRunLauncher({ store, storeRoot: fuzz.root, log, token: INFERENCE_TOKEN, pollMs: 20 });
    const app = createApiApp({ store, token: TOKEN, runs, evaluations: storeQueueLaunchers(store, { secrets, path: '/esopt/test/eval-keys' }).evaluations, exports: new InProcessModelExports(store), deployed: false, servesOwnModels: true, prices: measuredPrices(), log, eventPollMs: 20 });
    try {
      const res = await app.request('/runs', {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': 'auth-run' },
        body: JSON.stringify(tinyRunConfig({ iterations: 2, evalInterval: 2, checkpointInterval: 2 })),
      });
      expect(res.status).toBe(201);
      const { id } = (await res.json()) as { id: string };
      await runs.settled();
      const status = await app.request(`/runs/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(((await status.json()) as { state: string }).state).toBe('finished');
      // An external endpoint's key: this deployment queues evaluations in the store, so the key goes to the
      // secret store (bound to the endpoint's origin) and the queue entry only names it.
      const keyed = await app.request('/evaluations', {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: { kind: 'external', baseUrl: 'http://127.0.0.1:9/v1', model: 'theirs', apiKey: ENDPOINT_KEY }, environment: { name: 'sudoku' }, tasks: { split: 'eval', count: 1 }, episodes: 1 }),
      });
      expect(keyed.status).toBe(202);
      const { id: evaluation } = (await keyed.json()) as { id: string };
      expect(JSON.parse(secrets.secrets.get(`/esopt/test/eval-keys/${evaluation}`)!.value)).toEqual({ apiKey: ENDPOINT_KEY, origin: 'http://127.0.0.1:9' });
      expect((await store.list('evaluations/')).length).toBeGreaterThanOrEqual(2);
      expect(await store.list('queue/evaluation/')).toHaveLength(1);

      const files = (readdirSync(fuzz.root, { recursive: true }) as string[]).map((f) => join(fuzz.root, f)).filter((f) => !readdirSafe(f));
      // Rewards, the manifest, checkpoints, metrics, the report, the idempotency record: many objects, none holding a token.
      expect(files.length).toBeGreaterThan(10);
      for (const file of files) {
        const bytes = readFileSync(file);
        for (const secret of [TOKEN, INFERENCE_TOKEN, ENDPOINT_KEY]) expect(bytes.includes(Buffer.from(secret)), `${relative(fuzz.root, file)} holds a token`).toBe(false);
      }
      expect(logs.length).toBeGreaterThan(0);
      for (const line of logs) for (const secret of [TOKEN, INFERENCE_TOKEN, ENDPOINT_KEY]) expect(line).not.toContain(secret);
    } finally {
      fuzz.dispose();
    }
  }, 120_000);
});

function readdirSafe(path: string): boolean {
  try {
    readdirSync(path);
    return true;
  } catch {
    return false;
  }
}
