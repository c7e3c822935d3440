/**
 * The cloud API end to end on loopback: the app the Api Lambda serves (createCloudApp) over s3rver,
 * the dev Lambda-invoke endpoint running the real Episode handler, and the trainer box's poller
 * (TrainerBox) — every part talking through the real AWS SDK clients. POST /runs and POST
 * /evaluations only queue work in the bucket; the poller claims it, trains / evaluates the tiny model
 * with the episodes played by the Episode handler against the box's inference server, and the API
 * then shows what landed in the bucket: metrics, a clean stop, episode transcripts. The box serves over
 * TLS as deployed: its certificate published in the bucket, pinned by the Episode handler.
 */
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { startLocalCloud, EPISODE_FUNCTION, type LocalCloud } from '../../trainer/dev/local-cloud/local-cloud.ts';
import { StoredTranscript } from '../../functions/episode-transcript.ts';
import { keys } from '../../shared/keys.ts';
import { ActiveRun, EvaluationView, MetricsRow, RunDetail, WorkClaim, type EvaluationRequestInput } from '../../shared/schemas/index.ts';
import { CloudStack } from '../../trainer/assembly/cloud-stack.ts';
import { TrainerBox } from '../../trainer/cloud/box/trainer-box.ts';
import { createTlsIdentity, type TlsIdentity } from '../../trainer/serving/tls-identity.ts';
import { TrainerCertificate } from '../../shared/schemas/trainer-certificate.ts';
import { tinyRunConfig, waitFor } from '../api/helpers.ts';
import { esopt, freePort } from './helpers/esopt-process.ts';
import { localStackEnv, S3RVER_CREDENTIALS } from './helpers/local-stack-env.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';
import { STACK_CAPS } from './helpers/stack-caps.ts';

const BOX_TOKEN = 'trainer-box-test-token';
const API_TOKEN = 'trainer-box-test-api-token-0123';

let cloud: LocalCloud;
let target: CloudStack;
let api: ReturnType<typeof serve>;
let apiUrl: string;
let port: number;
let identity: TlsIdentity;
const pollers: TrainerBox[] = [];
const savedEnv = { ...process.env };
/** s3rver's fixed development key pair, through the SDK's default credential chain, as the box would get its role's. */

function poller(o: { port?: number; pollMs?: number } = {}): TrainerBox {
  const p = o.port ?? port;
  const box = new TrainerBox({
    cloud: target,
    publicUrl: `https://127.0.0.1:${p}/v1`,
    tls: identity,
    host: '127.0.0.1',
    port: p,
    token: BOX_TOKEN,
    pollMs: o.pollMs ?? 100,
    claimSettleMs: 100,
    stopPollMs: 50,
    trainingPollMs: 20,
    log: pino({ level: 'silent' }),
  });
  pollers.push(box);
  return box;
}

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${apiUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
}

const detail = async (id: string) => RunDetail.parse((await call('GET', `/runs/${id}`)).body);
const decode = (body: Uint8Array | null) => (body === null ? null : JSON.parse(new TextDecoder().decode(body)));

beforeAll(async () => {
  Object.assign(process.env, S3RVER_CREDENTIALS);
  port = await freePort();
  identity = await createTlsIdentity(['127.0.0.1']);
  // The Episode function's environment as the stack sets it: the box's https URL (its certificate pinned) and the token.
  cloud = await startLocalCloud({ prices: measuredPrices(), env: { ESOPT_TRAINER_URL: `https://127.0.0.1:${port}/v1`, ESOPT_TRAINER_TOKEN: BOX_TOKEN } });
  target = CloudStack.parse({ bucket: cloud.s3.bucket, episodeFunction: EPISODE_FUNCTION, s3Endpoint: cloud.s3.endpoint, lambdaEndpoint: cloud.invoke.url });
  const app = createCloudApp({ ESOPT_BUCKET: cloud.s3.bucket, AWS_REGION: 'us-east-1', ESOPT_TOKEN: API_TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS }, cloud.store, pino({ level: 'silent' }));
  api = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const p of pollers) await p.close();
  await new Promise<void>((resolve) => (api ? api.close(() => resolve()) : resolve()));
  await cloud?.close();
  for (const k of Object.keys(S3RVER_CREDENTIALS)) delete process.env[k];
  Object.assign(process.env, savedEnv);
});

describe('runs through the cloud API and the trainer box', () => {
  let run: string;

  it('POST /runs queues the run (201, idempotent); the box claims and trains it; GET /runs/{id} shows its metrics', async () => {
    const config = tinyRunConfig({ name: 'boxed', iterations: 2, evalInterval: 1 });
    const post = await call('POST', '/runs', config, { 'idempotency-key': 'box-run-1' });
    expect(post.status).toBe(201);
    run = post.body.id;
    const again = await call('POST', '/runs', config, { 'idempotency-key': 'box-run-1' });
    expect(again).toMatchObject({ status: 201, body: { id: run } });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await cloud.store.list(keys.workQueue())).toEqual([keys.queuedWork('run', run)]);
    expect((await detail(run)).state).toBe('requested');

    const ran = await poller().pollOnce();
    expect(ran).toEqual([{ kind: 'run', id: run }]);
    // The box published the certificate the Episode handler pinned for every call to it.
    expect(TrainerCertificate.parse(decode(await cloud.store.get(keys.trainerCertificate())))).toMatchObject({ certificate: identity.cert, sha256: identity.sha256 });
    // It named the run for the stack's replica boxes to follow (trainer/cloud/box/replica-box.ts).
    expect(ActiveRun.parse(decode(await cloud.store.get(keys.activeRun()))).run).toBe(run);

    const shown = await detail(run);
    expect(shown).toMatchObject({ state: 'finished', completedIterations: 2, iterations: 2, current: null, stopRequested: false });
    const rows = await Promise.all([0, 1].map(async (k) => MetricsRow.parse(decode(await cloud.store.get(keys.metricsRow(run, k))))));
    expect(shown.latest).toEqual(rows[1]);
    // Every member's episode was played by the Episode handler against the box's server: counted, none failed.
    for (const row of rows) expect(row).toMatchObject({ expected: 2, counted: 2, failed: 0 });
    expect(rows[0].tokens.completion).toBeGreaterThan(0);
    const series = await call('GET', `/runs/${run}/metrics`);
    expect(series.body.rows).toEqual(rows);
    expect(series.body.evaluations.length).toBeGreaterThan(0);
    expect(shown.status?.startedAt).not.toBeNull();
    expect(await cloud.store.list(keys.workQueue())).toEqual([]);
    expect(WorkClaim.parse(decode(await cloud.store.get(keys.workClaim('run', run))))).toMatchObject({ kind: 'run', id: run });
  }, 120_000);

  it('GET /runs/{id}/model queues an export; the box makes it on its export lane; the archive downloads by a presigned URL', async () => {
    const first = await call('GET', `/runs/${run}/model?format=onnx`);
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ run, iteration: 2, format: 'onnx', state: 'queued' });
    const box = poller();
    // The export lane alone: it never waits behind a run on the job lane.
    const ran = await box.pollOnce((kind) => kind === 'export');
    expect(ran).toHaveLength(1);
    expect(ran[0].kind).toBe('export');
    const ready = await call('GET', `/runs/${run}/model?format=onnx`, undefined, { accept: 'application/json' });
    expect(ready.status).toBe(200);
    const log = new TextDecoder().decode((await cloud.store.get(keys.log(run)))!).trim().split('\n').map((l) => JSON.parse(l) as { thetaHashAfter: string });
    expect(ready.body).toMatchObject({ state: 'ready', thetaHash: log[1].thetaHashAfter });
    const download = await fetch(ready.body.url);
    expect(download.status).toBe(200);
    const bytes = new Uint8Array(await download.arrayBuffer());
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(ready.body.sha256);
    // A tarball holding the model directory.
    expect(new TextDecoder().decode(bytes.subarray(257, 262))).toBe('ustar');
    expect(await cloud.store.list(keys.workQueue())).toEqual([]);
  }, 120_000);

  it('a request seen again after it ran (a re-delivered entry) is not run twice', async () => {
    const before = await cloud.store.list(keys.run(run));
    await cloud.store.put(keys.queuedWork('run', run), JSON.stringify({ kind: 'run', id: run, queuedAt: new Date().toISOString() }));
    expect(await poller().pollOnce()).toEqual([]);
    expect(await cloud.store.list(keys.workQueue())).toEqual([]);
    expect(await cloud.store.list(keys.run(run))).toEqual(before);
    expect((await detail(run)).state).toBe('finished');
  }, 30_000);

  it('POST /runs/{id}/resume queues a finished run again: its old claim cleared, the box goes on from its checkpoint', async () => {
    const thetaBefore = (await detail(run)).latest!.thetaHashAfter;
    const res = await call('POST', `/runs/${run}/resume`, { iterations: 3 });
    expect(res).toMatchObject({ status: 202, body: { id: run, state: 'requested', completedIterations: 2, iterations: 3, changes: ['iterations 2 → 3'] } });
    expect(await cloud.store.get(keys.workClaim('run', run))).toBeNull();
    expect(await cloud.store.list(keys.workQueue())).toEqual([keys.queuedWork('run', run)]);
    expect(await poller().pollOnce()).toEqual([{ kind: 'run', id: run }]);
    const shown = await detail(run);
    expect(shown).toMatchObject({ state: 'finished', completedIterations: 3, iterations: 3 });
    // θ_2 was not retrained: the log's first two entries are the ones the first start wrote
    const log = new TextDecoder().decode((await cloud.store.get(keys.log(run)))!).trim().split('\n').map((l) => JSON.parse(l) as { iteration: number; thetaHashAfter: string });
    expect(log.map((e) => e.iteration)).toEqual([0, 1, 2]);
    expect(log[1].thetaHashAfter).toBe(thetaBefore);
    expect(await cloud.store.list(keys.workQueue())).toEqual([]);
  }, 60_000);

  it('two boxes polling the same queue run a run once', async () => {
    const post = await call('POST', '/runs', tinyRunConfig({ name: 'raced', iterations: 1, evalInterval: 1 }));
    expect(post.status).toBe(201);
    const [a, b] = [poller(), poller({ port: await freePort() })];
    const [ranA, ranB] = await Promise.all([a.pollOnce(), b.pollOnce()]);
    expect([...ranA, ...ranB]).toEqual([{ kind: 'run', id: post.body.id }]);
    expect(await detail(post.body.id)).toMatchObject({ state: 'finished', completedIterations: 1 });
  }, 120_000);

  it('POST /runs/{id}/stop ends a running run after its current iteration; a run stopped while queued never starts', async () => {
    const box = poller();
    box.start();
    const post = await call('POST', '/runs', tinyRunConfig({ name: 'stopped', iterations: 20, evalInterval: 20 }));
    const id = post.body.id as string;
    await waitFor(async () => ((await detail(id)).completedIterations >= 1 ? true : undefined), 90_000, 'the first iteration');
    const stop = await call('POST', `/runs/${id}/stop`);
    expect(stop).toMatchObject({ status: 202, body: { id, stopRequested: true } });
    const stopped = await waitFor(async () => {
      const d = await detail(id);
      return d.state === 'stopped' ? d : undefined;
    }, 90_000, 'the stop');
    // Stopped cleanly at an iteration boundary: every completed iteration has its row, and no more ran.
    expect(stopped.completedIterations).toBeGreaterThanOrEqual(1);
    expect(stopped.completedIterations).toBeLessThan(20);
    expect(stopped.current).toBeNull();
    expect(stopped.status?.error).toBeNull();
    await box.close();

    const queued = (await call('POST', '/runs', tinyRunConfig({ name: 'never' }))).body.id as string;
    expect((await call('POST', `/runs/${queued}/stop`)).status).toBe(202);
    expect((await detail(queued)).state).toBe('stopping');
    expect(await poller().pollOnce()).toEqual([{ kind: 'run', id: queued }]);
    expect(await detail(queued)).toMatchObject({ state: 'stopped', completedIterations: 0 });
    expect(await cloud.store.list(keys.manifest(queued, 0))).toEqual([]);
  }, 180_000);
});

describe('evaluations through the cloud API and the trainer box', () => {
  it('POST /evaluations of the base model runs on the box; every episode links its stored transcript', async () => {
    const request: EvaluationRequestInput = {
      model: { kind: 'base', model: { preset: 'tiny', seed: 0 } },
      environment: { name: 'sudoku', options: { size: 4, blanks: 2 } },
      tasks: { split: 'eval', count: 2, seed: 1 },
      episodes: 3,
      concurrency: 2,
      generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 8 },
      timeoutMs: 30_000,
    };
    const post = await call('POST', '/evaluations', request, { 'idempotency-key': 'box-eval-1' });
    expect(post.status).toBe(202);
    const id = post.body.id as string;
    expect((await call('POST', '/evaluations', request, { 'idempotency-key': 'box-eval-1' })).body).toEqual({ id });
    expect(EvaluationView.parse((await call('GET', `/evaluations/${id}`)).body).status.state).toBe('queued');

    expect(await poller().pollOnce()).toEqual([{ kind: 'evaluation', id }]);
    const view = EvaluationView.parse((await call('GET', `/evaluations/${id}`)).body);
    expect(view.status).toMatchObject({ state: 'finished', stopReason: 'completed', planned: 3, dispatched: 3 });
    expect(view.episodes.map((e) => e.index)).toEqual([0, 1, 2]);
    for (const episode of view.episodes) {
      // Played by the box's model through the Episode handler: a real reply, no error.
      expect(episode.error, JSON.stringify(episode)).toBeNull();
      expect(episode.tokens.completion).toBeGreaterThan(0);
      expect(episode.transcript).toBe(`/evaluations/${id}/episodes/${episode.index}/transcript`);
      const got = await call('GET', episode.transcript as string);
      expect(got.status).toBe(200);
      const transcript = StoredTranscript.parse(got.body);
      expect(transcript).toMatchObject({ run: id, iteration: episode.round, member: 'base', task: episode.task, truncated: null });
      const actions = transcript.entries.filter((e) => e.kind === 'action');
      expect(actions.length).toBe(episode.steps);
      expect(actions.reduce((n, e) => n + (e.kind === 'action' ? e.tokens.completion : 0), 0)).toBe(episode.tokens.completion);
    }
    expect(view.summary.episodes).toBe(3);
  }, 120_000);
});

describe('esopt trainer-box', () => {
  it('--once claims and runs what is queued over TLS with a certificate of its own, then exits; a missing token is a usage error', async () => {
    const id = (await call('POST', '/runs', tinyRunConfig({ name: 'cli', iterations: 1, evalInterval: 1 }))).body.id as string;
    const env = localStackEnv(cloud);
    const box = (extra: Record<string, string>) => esopt(['trainer-box', '--once', '--json', '--public-url', `https://127.0.0.1:${port}/v1`, '--host', '127.0.0.1', '--port', String(port)], { ...env, ...extra });
    const missing = await box({});
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/ESOPT_TOKEN is not set/);
    const badProvider = await esopt(['trainer-box', '--once', '--public-url', `http://127.0.0.1:${port}/v1`, '--provider', 'tpu'], { ...env, ESOPT_TOKEN: BOX_TOKEN });
    expect(badProvider.code).toBe(2);
    expect(badProvider.stderr).toMatch(/--provider/);
    const exit = await box({ ESOPT_TOKEN: BOX_TOKEN });
    expect(exit.code, exit.stderr).toBe(0);
    expect(JSON.parse(exit.stdout.trim().split('\n').at(-1) as string)).toEqual({ ran: [{ kind: 'run', id }] });
    expect(await detail(id)).toMatchObject({ state: 'finished', completedIterations: 1 });
    // The command made its own certificate, published it, and the Episode handler pinned it: every episode counted.
    const published = TrainerCertificate.parse(decode(await cloud.store.get(keys.trainerCertificate())));
    expect(published.sha256).not.toBe(identity.sha256);
    expect(MetricsRow.parse(decode(await cloud.store.get(keys.metricsRow(id, 0))))).toMatchObject({ expected: 2, counted: 2, failed: 0 });
  }, 120_000);
});
