/**
 * Across the API: bearer auth on every route the OpenAPI document lists (and none on the public ones),
 * the document itself, the docs page, Idempotency-Key across two API instances over one store, unknown
 * routes, and request logs that never contain a token.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, TOKEN, type TestApi } from './helpers.ts';

let api: TestApi;
let second: TestApi;

beforeAll(async () => {
  api = await startTestApi();
  second = await startTestApi(api.storeRoot);
});

afterAll(async () => {
  await second?.close();
  await api?.dispose();
});

describe('bearer auth', () => {
  it('guards every route in the OpenAPI document, and lets the right token through', async () => {
    const doc = (await api.call('GET', '/openapi.json', { token: null })).body;
    const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) => Object.keys(ops).map((method) => ({ method: method.toUpperCase(), path: path.replace(/\{[^}]+\}/g, '0') })));
    expect(operations.length).toBeGreaterThanOrEqual(11);
    for (const { method, path } of operations) {
      for (const token of [null, 'wrong', `${TOKEN.slice(0, -1)}x`, `${TOKEN}x`]) {
        const r = await api.call(method, path, { token, body: method === 'POST' ? {} : undefined });
        expect(r.status, `${method} ${path} with ${token}`).toBe(401);
        expect(r.body.error.code).toBe('unauthorized');
        expect(r.headers.get('www-authenticate')).toBe('Bearer');
      }
    }
    expect((await api.call('GET', '/runs')).status).toBe(200);
    expect((await api.call('GET', '/runs', { headers: { authorization: `bearer ${TOKEN}` }, token: null })).status).toBe(200);
  });

  it('leaves health, the OpenAPI document, the docs page and the dashboard shell public', async () => {
    for (const path of ['/healthz', '/openapi.json', '/docs', '/', '/assets/uplot.js', '/assets/uplot.css', '/assets/dashboard.js', '/assets/dashboard.css']) {
      expect((await api.call('GET', path, { token: null })).status, path).toBe(200);
    }
    expect((await api.call('GET', '/assets/secret.txt', { token: null })).status).toBe(401);
  });
});

describe('the OpenAPI document and docs', () => {
  it('is built from the shared zod schemas, with the bearer scheme and the error body', async () => {
    const doc = (await api.call('GET', '/openapi.json', { token: null })).body;
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    for (const name of ['RunDetail', 'RunList', 'MetricsSeries', 'CheckpointList', 'EvaluationRequest', 'EvaluationView', 'EvaluationSummary', 'ApiError', 'Created']) expect(doc.components.schemas, name).toHaveProperty(name);
    const postRuns = doc.paths['/runs'].post;
    const body = postRuns.requestBody.content['application/json'].schema;
    expect(body.properties.es.properties.population).toMatchObject({ type: 'integer', minimum: 2 });
    expect(Object.keys(postRuns.responses)).toEqual(expect.arrayContaining(['201', '400', '401', '422']));
    expect(postRuns.parameters.some((p: { name: string; in: string }) => p.name === 'idempotency-key' && p.in === 'header')).toBe(true);
    expect(doc.paths['/runs/{id}/events'].get.responses['200'].content).toHaveProperty('text/event-stream');
    const ev = doc.components.schemas.EvaluationRequest;
    expect(ev.properties.model.oneOf ?? ev.properties.model.anyOf).toHaveLength(3);
  });

  it('serves the interactive docs page pointing at the document, every asset from this server (works offline)', async () => {
    const docs = await api.call('GET', '/docs', { token: null });
    expect(docs.headers.get('content-type')).toContain('text/html');
    expect(docs.body).toContain("url: '/openapi.json'");
    expect(docs.body).toContain('SwaggerUIBundle');
    // No external host anywhere on the page (a CDN link, the online validator): only this server's paths.
    expect(docs.body).not.toMatch(/https?:\/\/|\/\/[a-z0-9.-]+\.[a-z]{2,}/i);
    expect(docs.body).toContain('validatorUrl: null');
    const refs = [...(docs.body as string).matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(refs.sort()).toEqual(['/docs/assets/swagger-ui-bundle.js', '/docs/assets/swagger-ui.css']);
    for (const ref of refs) {
      const asset = await api.call('GET', ref, { token: null });
      expect(asset.status, ref).toBe(200);
      expect(asset.headers.get('content-type'), ref).toMatch(ref.endsWith('.js') ? /javascript/ : /css/);
      expect(String(asset.body).length, ref).toBeGreaterThan(10_000);
    }
    expect(String((await api.call('GET', '/docs/assets/swagger-ui-bundle.js', { token: null })).body)).toContain('SwaggerUIBundle');
    expect((await api.call('GET', '/docs/assets/other.js', { token: null })).status).toBe(401);
  });

  it('answers unknown routes with the JSON error body', async () => {
    expect(await api.call('GET', '/nope')).toMatchObject({ status: 404, body: { error: { code: 'not_found', message: 'no route GET /nope' } } });
  });
});

describe('Idempotency-Key', () => {
  it('holds across two API instances over one store', async () => {
    const body = { environment: { name: 'sudoku' }, model: { preset: 'tiny' }, es: { population: 1, sigma: 0.1, alpha: 0.1 }, iterations: 1 };
    const first = await api.call('POST', '/runs', { body, headers: { 'idempotency-key': 'shared-1' } });
    expect(first.status).toBe(400);
    const replayed = await second.call('POST', '/runs', { body, headers: { 'idempotency-key': 'shared-1' } });
    expect(replayed.status).toBe(400);
    expect(replayed.body).toEqual(first.body);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    const changed = await second.call('POST', '/runs', { body: { ...body, iterations: 2 }, headers: { 'idempotency-key': 'shared-1' } });
    expect(changed.status).toBe(422);
  });

  it('rejects a malformed key', async () => {
    const r = await api.call('POST', '/runs', { body: {}, headers: { 'idempotency-key': 'has spaces in it' } });
    expect(r).toMatchObject({ status: 400, body: { error: { code: 'invalid_idempotency_key' } } });
  });
});

describe('request logs', () => {
  it('log method, path and status for every request, and never a token', async () => {
    await api.call('GET', `/runs?token=${TOKEN}`);
    await api.call('GET', '/runs', { token: 'guess-me-123' });
    const lines = api.logs.map((l) => JSON.parse(l) as { path?: string; status?: number; method?: string });
    expect(lines.some((l) => l.path === '/runs' && l.status === 200 && l.method === 'GET')).toBe(true);
    expect(lines.some((l) => l.path === '/runs' && l.status === 401)).toBe(true);
    const all = api.logs.join('\n');
    expect(all).not.toContain(TOKEN);
    expect(all).not.toContain('guess-me-123');
  });
});
