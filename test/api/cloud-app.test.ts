/**
 * The app as the Api Lambda builds it (createCloudApp): over an S3 store (real AWS SDK client, s3rver on
 * loopback) holding a real finished run, it answers exactly what the local API answers; POSTs queue
 * work in the store for the trainer box (test/cloud/trainer-box.test.ts runs it) and start nothing
 * here; an endpoint key goes to the secret store, the queue entry names it (test/cloud/evaluation-key.test.ts
 * runs such an evaluation end to end).
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { QueuedWork, RunEvent } from '../../shared/schemas/index.ts';
import { MemorySecretStore } from '../cloud/helpers/memory-secrets.ts';
import { ApiClient } from '../../trainer/cli/api-client.ts';
import { readSse, startTestApi, tinyRunConfig, TOKEN, type TestApi } from './helpers.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';
import { STACK_CAPS } from '../cloud/helpers/stack-caps.ts';

let local: TestApi;
let s3: LocalS3;
let cloudUrl: string;
const secrets = new MemorySecretStore();
let server: ReturnType<typeof serve>;
let run: string;
const CLOUD_TOKEN = `${TOKEN}-cloud-0123456789`;

const cloud = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${cloudUrl}${path}`, { method, headers: { authorization: `Bearer ${CLOUD_TOKEN}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const parsed: any = res.headers.get('content-type')?.includes('json') ? await res.json() : await res.text();
  return { status: res.status, body: parsed };
};

beforeAll(async () => {
  local = await startTestApi();
  run = (await local.call('POST', '/runs', { body: tinyRunConfig({ name: 'cloudy' }) })).body.id;
  await local.runs.settled();
  s3 = await startLocalS3('esopt-api-test');
  const store = new S3ObjectStore({ ...s3.storeConfig });
  const fs = new FsObjectStore(local.storeRoot);
  for (const key of await fs.list('')) await store.put(key, (await fs.get(key)) as Uint8Array);
  // A short events window, so the tests see streams end early and resume as a Lambda's clients do.
  const app = createCloudApp({ ESOPT_BUCKET: s3.bucket, AWS_REGION: 'us-east-1', ESOPT_TOKEN: CLOUD_TOKEN, ESOPT_EVENT_WINDOW_MS: 600, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS }, store, undefined, secrets);
  server = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  cloudUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 120_000);

afterAll(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await s3?.close();
  await local?.dispose();
});

describe('createCloudApp over S3', () => {
  it('answers the read routes exactly as the local API does', async () => {
    for (const path of ['/runs', `/runs/${run}`, `/runs/${run}/metrics`, `/runs/${run}/checkpoints`]) {
      const [a, b] = await Promise.all([local.call('GET', path), cloud('GET', path)]);
      expect(b.status, path).toBe(200);
      expect(b.body, path).toEqual(a.body);
    }
    const events = await readSse(await fetch(`${cloudUrl}/runs/${run}/events`, { headers: { authorization: `Bearer ${CLOUD_TOKEN}` } }));
    expect(events.filter((e) => e.event === 'update-applied')).toHaveLength(3);
    expect(events.at(-1)?.data).toEqual({ type: 'end', state: 'finished' });
  });

  it('an events stream resumed with Last-Event-ID sends only what follows its cursor', async () => {
    const headers = { authorization: `Bearer ${CLOUD_TOKEN}` };
    const whole = await (await fetch(`${cloudUrl}/runs/${run}/events`, { headers })).text();
    const ids = [...whole.matchAll(/^id: (.*)$/gm)].map((m) => m[1]);
    expect(ids.at(-1)).toBe('2:3'); // three updates (0-2) and evaluations of θ_0, θ_2, θ_3
    const resumed = await readSse(await fetch(`${cloudUrl}/runs/${run}/events`, { headers: { ...headers, 'last-event-id': '1:0' } }));
    expect(resumed.filter((e) => e.event === 'update-applied').map((e) => e.data.iteration)).toEqual([2]);
    expect(resumed.filter((e) => e.event === 'evaluation').map((e) => e.data.iteration)).toEqual([2, 3]);
    expect(resumed.at(-1)?.data).toEqual({ type: 'end', state: 'finished' });
    // A cursor this server did not write replays everything.
    const foreign = await readSse(await fetch(`${cloudUrl}/runs/${run}/events`, { headers: { ...headers, 'last-event-id': '../../x' } }));
    expect(foreign.filter((e) => e.event === 'update-applied')).toHaveLength(3);
  });

  it('queues a new run in the store (status requested, one queue entry for the trainer box) and starts nothing', async () => {
    const post = await cloud('POST', '/runs', tinyRunConfig({ name: 'queued' }));
    expect(post.status).toBe(201);
    await new Promise((r) => setTimeout(r, 300));
    const detail = await cloud('GET', `/runs/${post.body.id}`);
    expect(detail.body).toMatchObject({ state: 'requested', completedIterations: 0, current: null });
    const store = new S3ObjectStore({ ...s3.storeConfig });
    expect(await store.list(keys.run(post.body.id))).toEqual([keys.config(post.body.id), keys.runStatus(post.body.id)]);
    expect(await store.list(keys.workQueue())).toEqual([keys.queuedWork('run', post.body.id)]);
  });

  it('queues an endpoint key in the secret store, bound to its origin; the queue entry names it, the bucket never holds it', async () => {
    const request = { model: { kind: 'external', baseUrl: 'http://127.0.0.1:9/v1', model: 'x', apiKey: 'sk-never-stored' }, environment: { name: 'sudoku', options: { size: 4 } }, tasks: { split: 'eval', count: 1 }, episodes: 1 };
    const post = await cloud('POST', '/evaluations', request);
    expect(post.status).toBe(202);
    const id = post.body.id as string;
    const parameter = `/esopt/test/eval-keys/${id}`;
    expect(JSON.parse(secrets.secrets.get(parameter)!.value)).toEqual({ apiKey: 'sk-never-stored', origin: 'http://127.0.0.1:9' });
    const store = new S3ObjectStore({ ...s3.storeConfig });
    const entry = QueuedWork.parse(JSON.parse(new TextDecoder().decode((await store.get(keys.queuedWork('evaluation', id)))!)));
    expect(entry).toMatchObject({ kind: 'evaluation', id, apiKey: { parameter, origin: 'http://127.0.0.1:9' } });
    const shown = await cloud('GET', `/evaluations/${id}`);
    expect(shown.body).toMatchObject({ status: { state: 'queued' }, request: { model: { hasApiKey: true } } });
    expect(JSON.stringify(shown.body)).not.toContain('sk-never-stored');
    for (const key of await store.list('')) expect(Buffer.from((await store.get(key))!).includes('sk-never-stored'), key).toBe(false);
  });

  it('a bad key is a 400 naming the field; an unkeyed evaluation stores no secret', async () => {
    const base = { environment: { name: 'sudoku', options: { size: 4 } }, tasks: { split: 'eval', count: 1 }, episodes: 1 };
    const bad = await cloud('POST', '/evaluations', { ...base, model: { kind: 'external', baseUrl: 'http://127.0.0.1:9/v1', model: 'x', apiKey: '' } });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('model.apiKey');
    const before = secrets.secrets.size;
    const plain = await cloud('POST', '/evaluations', { ...base, model: { kind: 'external', baseUrl: 'http://127.0.0.1:9/v1', model: 'x' } });
    expect(plain.status).toBe(202);
    expect(secrets.secrets.size).toBe(before);
  });

  it('a stream of an unfinished run ends after the window with a retry, and the CLI client reconnects', async () => {
    const queued = (await cloud('POST', '/runs', tinyRunConfig({ name: 'waiting' }))).body.id as string;
    const started = Date.now();
    const res = await fetch(`${cloudUrl}/runs/${queued}/events`, { headers: { authorization: `Bearer ${CLOUD_TOKEN}` } });
    const text = await res.text();
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    expect(text).toMatch(/^retry: 1000$/m);
    expect(text).not.toMatch(/event: end/);
    const client = new ApiClient(cloudUrl, CLOUD_TOKEN);
    const seen: RunEvent[] = [];
    const t0 = Date.now();
    for await (const event of client.events(queued)) {
      seen.push(event);
      if (Date.now() - t0 > 2500) break;
    }
    // One status event per connection: the client came back at least once on its own.
    expect(seen.filter((e) => e.type === 'status').length).toBeGreaterThanOrEqual(2);
    expect(seen.every((e) => e.type === 'status')).toBe(true);
  });
});

describe('createCloudApp: nothing is queued without a spending limit', () => {
  const evaluation = { model: { kind: 'external', baseUrl: 'http://127.0.0.1:9/v1', model: 'x' }, environment: { name: 'sudoku', options: { size: 4 } }, tasks: { split: 'eval', count: 1 }, episodes: 1 };
  const appWith = (caps: Record<string, number>) => {
    const app = createCloudApp({ ESOPT_BUCKET: s3.bucket, AWS_REGION: 'us-east-1', ESOPT_TOKEN: CLOUD_TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...caps }, new S3ObjectStore({ ...s3.storeConfig }), pino({ level: 'silent' }), secrets);
    return async (method: string, path: string, body?: unknown) => {
      const res = await app.request(path, { method, headers: { authorization: `Bearer ${CLOUD_TOKEN}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as any };
    };
  };
  const readJsonAt = async (key: string) => JSON.parse(new TextDecoder().decode((await new S3ObjectStore({ ...s3.storeConfig }).get(key))!));

  it('without a stack cap, refuses a run or an evaluation without budget.maxCostUsd (400 at that path) and takes one with it', async () => {
    const call = appWith({});
    for (const [path, body] of [['/runs', tinyRunConfig({ name: 'unbounded', budget: { maxEpisodes: 100 } })], ['/evaluations', evaluation]] as const) {
      const refused = await call('POST', path, body);
      expect(refused.status).toBe(400);
      expect(refused.body.error.issues).toEqual([{ path: 'budget.maxCostUsd', message: expect.stringMatching(/^is required on a deployed stack: .*ESOPT_MAX_(RUN|EVALUATION)_COST_USD/) }]);
    }
    const bounded = await call('POST', '/runs', tinyRunConfig({ name: 'bounded', budget: { maxCostUsd: 2 } }));
    expect(bounded.status).toBe(201);
    expect((await readJsonAt(keys.config(bounded.body.id))).budget).toEqual({ maxCostUsd: 2 });
    const evaluated = await call('POST', '/evaluations', { ...evaluation, budget: { maxCostUsd: 0.25 } });
    expect(evaluated.status).toBe(202);
    // The finished run of this file, which has no cost limit, resumes only with one; nothing changes.
    const lift = await call('POST', `/runs/${run}/resume`, { iterations: 4 });
    expect(lift.status).toBe(400);
    expect(lift.body.error.issues.map((i: { path: string }) => i.path)).toEqual(['budget.maxCostUsd']);
  });

  it('with ESOPT_MAX_RUN_COST_USD / ESOPT_MAX_EVALUATION_COST_USD, applies the cap to a request without a limit and refuses one above it', async () => {
    const call = appWith({ ESOPT_MAX_RUN_COST_USD: 3, ESOPT_MAX_EVALUATION_COST_USD: 0.5 });
    const capped = await call('POST', '/runs', tinyRunConfig({ name: 'capped', budget: { maxEpisodes: 100 } }));
    expect(capped.status).toBe(201);
    expect((await readJsonAt(keys.config(capped.body.id))).budget).toEqual({ maxEpisodes: 100, maxCostUsd: 3 });
    const below = await call('POST', '/runs', tinyRunConfig({ name: 'under', budget: { maxCostUsd: 1.5 } }));
    expect((await readJsonAt(keys.config(below.body.id))).budget).toEqual({ maxCostUsd: 1.5 });
    const above = await call('POST', '/runs', tinyRunConfig({ name: 'over', budget: { maxCostUsd: 3.01 } }));
    expect(above.status).toBe(400);
    expect(above.body.error.issues).toEqual([{ path: 'budget.maxCostUsd', message: "is 3.01, above this stack's cap of 3 USD per run (ESOPT_MAX_RUN_COST_USD)" }]);

    const evaluated = await call('POST', '/evaluations', evaluation);
    expect(evaluated.status).toBe(202);
    expect((await readJsonAt(keys.evaluationRequest(evaluated.body.id))).budget).toEqual({ maxCostUsd: 0.5 });
    const tooDear = await call('POST', '/evaluations', { ...evaluation, budget: { maxCostUsd: 1 } });
    expect(tooDear.status).toBe(400);
    expect(tooDear.body.error.issues).toEqual([{ path: 'budget.maxCostUsd', message: "is 1, above this stack's cap of 0.5 USD per evaluation (ESOPT_MAX_EVALUATION_COST_USD)" }]);

    // The finished run of this file, which has no cost limit, resumes under the cap.
    const resumed = await call('POST', `/runs/${run}/resume`, { iterations: 4 });
    expect(resumed.status).toBe(202);
    expect(resumed.body.budget).toEqual({ maxCostUsd: 3 });
    expect(resumed.body.changes).toEqual(['iterations 3 → 4', "budget.maxCostUsd none → 3 (the stack's cap)"]);
    expect((await readJsonAt(keys.config(run))).budget).toEqual({ maxCostUsd: 3 });
  });
});
