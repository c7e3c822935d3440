/**
 * 1,000 fast-check requests per operation of the API's own OpenAPI document (so a new route is fuzzed
 * without touching this file), through hono's in-process fetch over a real filesystem store: random
 * JSON, broken JSON text and near-valid bodies, hostile path parameters, odd Idempotency-Keys and
 * content types. Every answer is 2xx or 4xx with the API's error body, every 400 names its zod issues,
 * and nothing reaches the 500 handler or the error log.
 */
import fc from 'fast-check';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadEnvironment } from '../../environments/index.ts';
import { keys } from '../../shared/keys.ts';
import { ApiError, RunStatus } from '../../shared/schemas/index.ts';
import { tinyRunConfig } from '../api/helpers.ts';
import { apiOverTempStore, operationsOf, pathWith, undocumentedRoutes, type FuzzedApi, type Operation } from './helpers/api-app.ts';
import { bodyText, fuzzBody, pathParam, type FuzzBody, type Json } from './helpers/fuzz-bodies.ts';

const TOKEN = 'fuzz-token-0123456789abcdef';
const RUNS_PER_ROUTE = 1000;

/** Read once at load time, so each operation is its own test. */
const probe = apiOverTempStore(TOKEN);
const ops: Operation[] = await operationsOf(probe.app);
const undocumented = undocumentedRoutes(probe.app, ops);
probe.dispose();

const validBodies = new Map<string, Json>();
validBodies.set('POST /runs', tinyRunConfig() as unknown as Json);
validBodies.set('POST /runs/{id}/resume', { iterations: 6, budget: { maxEpisodes: 500 } });

let api: FuzzedApi;
let existing: string[] = [];

/** A request as the fuzzer sends it, and what came back. */
async function send(method: string, path: string, body: FuzzBody | null, headers: Record<string, string>): Promise<{ status: number; contentType: string; json: unknown }> {
  const res = await api.app.request(path, { method, headers: { authorization: `Bearer ${TOKEN}`, ...headers }, ...(body ? { body: bodyText(body) } : {}) });
  const contentType = res.headers.get('content-type') ?? '';
  if (contentType.startsWith('text/event-stream')) {
    // A stream of a run that exists: it opened, which is all this test asks of it.
    await res.body?.cancel();
    return { status: res.status, contentType, json: null };
  }
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON: the assertions report it
  }
  return { status: res.status, contentType, json };
}

beforeAll(async () => {
  const sudoku = await loadEnvironment('sudoku');
  const [task] = sudoku.sampleTasks('eval', 1, 3, sudoku.optionsSchema.parse({ size: 4 }));
  validBodies.set('POST /evaluations', {
    model: { kind: 'external', baseUrl: 'http://127.0.0.1:9/v1', model: 'their-agent' },
    environment: { name: 'sudoku', options: { size: 4, blanks: 2 } },
    tasks: { tasks: [{ id: 't-1', task: task.task as Json }] },
    episodes: 2,
    budget: { maxEpisodes: 2 },
  });
});

/** A fresh store per operation holding one run and one evaluation, so fuzzed ids sometimes get past the 404. */
beforeEach(async () => {
  api = apiOverTempStore(TOKEN);
  existing = [];
  for (const [route, body] of validBodies) {
    const [method, path] = route.split(' ');
    if (path.includes('{')) continue; // a route on a run that exists: fuzzed against the ones made here
    const res = await send(method, path, { kind: 'json', value: body }, { 'content-type': 'application/json' });
    expect(res.status, JSON.stringify(res.json)).toBeLessThan(300);
    existing.push((res.json as { id: string }).id);
  }
});
afterEach(() => api.dispose());

describe('API fuzz', () => {
  it('documents every route it serves beyond the public shell, so every route is fuzzed below', () => {
    expect(ops.length).toBeGreaterThanOrEqual(11);
    expect(undocumented).toEqual(['GET /', 'GET /assets/:name', 'GET /docs', 'GET /docs/assets/:name', 'GET /healthz', 'GET /openapi.json']);
    for (const op of ops.filter((o) => o.hasBody)) expect(validBodies.has(`${op.method} ${op.path}`), `a valid body for ${op.method} ${op.path}`).toBe(true);
  });

  it.each(ops.map((op) => [`${op.method} ${op.path}`, op] as const))(`answers ${RUNS_PER_ROUTE} fuzzed requests to %s with 2xx or 4xx, zod issues on every 400`, async (route, op) => {
    const seen = new Map<number, number>();
    const valid = validBodies.get(route) ?? {};
    // Only a run that ended can go on: the run made above, stopped (its launcher queued it and nothing ran it).
    if (route === 'POST /runs/{id}/resume') {
      const status = RunStatus.parse(JSON.parse(Buffer.from((await api.store.get(keys.runStatus(existing[0])))!).toString('utf8')));
      await api.store.put(keys.runStatus(existing[0]), JSON.stringify({ ...status, state: 'stopped', finishedAt: new Date().toISOString() }));
    }
    const request = fc.record({
      params: fc.record(Object.fromEntries(op.params.map((p) => [p, pathParam(existing)]))),
      query: fc.option(fc.string({ maxLength: 30 }).map((q) => `?${encodeURIComponent(q)}=${encodeURIComponent(q)}`), { freq: 4, nil: '' }),
      body: op.hasBody ? fuzzBody(valid) : fc.constant(null),
      contentType: fc.constantFrom('application/json', 'application/json', 'application/json', 'application/json; charset=utf-8', 'text/plain', ''),
      idempotencyKey: fc.option(fc.oneof(fc.string({ maxLength: 300 }), fc.constantFrom('k-1', 'k-2')), { freq: 3 }),
    });
    await fc.assert(
      fc.asyncProperty(request, async ({ params, query, body, contentType, idempotencyKey }) => {
        const headers: Record<string, string> = {};
        if (contentType) headers['content-type'] = contentType;
        // A header value fetch itself refuses (control characters) is the client's error, not a request.
        if (idempotencyKey !== null && !/[\0\r\n]/.test(idempotencyKey)) headers['idempotency-key'] = idempotencyKey;
        const res = await send(op.method, pathWith(op, params as Record<string, string>) + query, body, headers);
        seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
        const what = `${route} → ${res.status} ${JSON.stringify(res.json)}`;
        expect(res.status, what).toBeGreaterThanOrEqual(200);
        expect(res.status, what).toBeLessThan(500);
        if (res.status >= 400) {
          const error = ApiError.parse(res.json);
          if (res.status === 400) {
            expect(error.error.issues?.length, what).toBeGreaterThan(0);
            for (const issue of error.error.issues ?? []) expect(issue.path.length, what).toBeGreaterThan(0);
          }
        }
      }),
      { numRuns: RUNS_PER_ROUTE },
    );
    expect(api.logs.filter((l) => (JSON.parse(l) as { level: number }).level >= 50)).toEqual([]);
    const statuses = [...seen.keys()];
    if (op.hasBody) {
      // The fuzzer reached past validation: some bodies were accepted, some refused with issues.
      expect(statuses.some((s) => s < 300), `${route}: ${statuses}`).toBe(true);
      expect(statuses).toContain(400);
    }
    console.log(`${route}:`, JSON.stringify(Object.fromEntries([...seen].sort((a, b) => a[0] - b[0]))));
  }, 60_000);
});
