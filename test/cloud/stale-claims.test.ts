/**
 * No stuck work: a trainer box killed mid-claim (SIGKILL, a real child process running `esopt trainer-box`)
 * leaves a run, an evaluation and a model export claimed by a process that is gone; the next box's poll
 * takes each over by the one stale-claim rule (shared/stale-claim.ts) and finishes it. A claimant that may
 * be alive (on another host, with a recent heartbeat) keeps its claim, and its entry stays queued to be
 * looked at again. A run under way whose entry is gone is resumed over the API (queued afresh) by the same rule,
 * and refused while a claimant that may be alive holds it. On loopback: the cloud API over s3rver, the Episode handler, the box serving over TLS.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { keys } from '../../shared/keys.ts';
import { hostname } from 'node:os';
import { claimEndedHere, claimRunsHere } from '../../shared/stale-claim.ts';
import { EvaluationView, QueuedWork, RunConfig, RunDetail, WorkClaim, type EvaluationRequestInput, type WorkKind } from '../../shared/schemas/index.ts';
import { CloudStack } from '../../trainer/assembly/cloud-stack.ts';
import { TrainerBox } from '../../trainer/cloud/box/trainer-box.ts';
import { startLocalCloud, EPISODE_FUNCTION, type LocalCloud } from '../../trainer/dev/local-cloud/local-cloud.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';
import { createTlsIdentity, type TlsIdentity } from '../../trainer/serving/tls-identity.ts';
import { tinyRunConfig, waitFor } from '../api/helpers.ts';
import { freePort } from './helpers/esopt-process.ts';
import { localStackEnv, S3RVER_CREDENTIALS } from './helpers/local-stack-env.ts';
import { STACK_CAPS } from './helpers/stack-caps.ts';

const BOX_TOKEN = 'stale-claims-test-box-token';
const API_TOKEN = 'stale-claims-test-api-token-0123';
const BIN = join(import.meta.dirname, '../../trainer/cli/bin.js');

let cloud: LocalCloud;
let target: CloudStack;
let api: ReturnType<typeof serve>;
let apiUrl: string;
let port: number;
let identity: TlsIdentity;
const boxes: TrainerBox[] = [];
const savedEnv = { ...process.env };

function box(): TrainerBox {
  const b = new TrainerBox({ cloud: target, publicUrl: `https://127.0.0.1:${port}/v1`, tls: identity, host: '127.0.0.1', port, token: BOX_TOKEN, claimSettleMs: 50, stopPollMs: 50, trainingPollMs: 20, log: pino({ level: 'silent' }) });
  boxes.push(b);
  return b;
}

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${apiUrl}${path}`, { method, headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}
const decode = (body: Uint8Array | null) => (body === null ? null : JSON.parse(new TextDecoder().decode(body)));

/**
 * `esopt trainer-box` in a child, as the service runs on a box, killed (SIGKILL) the moment it has claimed work of
 * `kind` (and, when given, once `until` holds too).
 */
async function killedMidClaim(kind: WorkKind, o: { id?: string; until?: () => Promise<boolean> } = {}): Promise<WorkClaim> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_') && !k.startsWith('ESOPT_')));
  const child: ChildProcess = spawn(process.execPath, [BIN, 'trainer-box', '--public-url', `https://127.0.0.1:${port}/v1`, '--host', '127.0.0.1', '--port', String(port), '--poll-ms', '50'], {
    env: { ...inherited, ...localStackEnv(cloud), ESOPT_TOKEN: BOX_TOKEN },
    stdio: 'ignore',
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    const key = await waitFor(async () => (o.id === undefined ? (await cloud.store.list(`claims/${kind}/`))[0] : (await cloud.store.get(keys.workClaim(kind, o.id))) ? keys.workClaim(kind, o.id) : undefined), 60_000, `the child box's claim on the ${kind}`);
    const claim = WorkClaim.parse(decode(await cloud.store.get(key)));
    expect(claim.claimedBy).toMatch(new RegExp(`:${child.pid}$`));
    if (o.until) await waitFor(async () => ((await o.until!()) ? true : undefined), 60_000, `the child box's ${kind} to get where it is killed`);
    return claim;
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
}

beforeAll(async () => {
  Object.assign(process.env, S3RVER_CREDENTIALS);
  port = await freePort();
  identity = await createTlsIdentity(['127.0.0.1']);
  cloud = await startLocalCloud({ prices: measuredPrices(), env: { ESOPT_TRAINER_URL: `https://127.0.0.1:${port}/v1`, ESOPT_TRAINER_TOKEN: BOX_TOKEN } });
  target = CloudStack.parse({ bucket: cloud.s3.bucket, episodeFunction: EPISODE_FUNCTION, s3Endpoint: cloud.s3.endpoint, lambdaEndpoint: cloud.invoke.url });
  const app = createCloudApp({ ESOPT_BUCKET: cloud.s3.bucket, AWS_REGION: 'us-east-1', ESOPT_TOKEN: API_TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS }, cloud.store, pino({ level: 'silent' }));
  api = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  for (const b of boxes) await b.close();
  await new Promise<void>((resolve) => (api ? api.close(() => resolve()) : resolve()));
  await cloud?.close();
  for (const k of Object.keys(S3RVER_CREDENTIALS)) delete process.env[k];
  Object.assign(process.env, savedEnv);
});

describe('a box killed mid-claim', () => {
  let run: string;

  it('leaves a run that the next box takes over and finishes', async () => {
    run = (await call('POST', '/runs', tinyRunConfig({ name: 'orphan', iterations: 1, evalInterval: 1 }))).body.id;
    await killedMidClaim('run');
    expect(RunDetail.parse((await call('GET', `/runs/${run}`)).body).state).not.toBe('finished');
    expect(await cloud.store.get(keys.queuedWork('run', run))).not.toBeNull();
    expect(await box().pollOnce()).toEqual([{ kind: 'run', id: run }]);
    expect(RunDetail.parse((await call('GET', `/runs/${run}`)).body)).toMatchObject({ state: 'finished', completedIterations: 1 });
    expect(await cloud.store.list(keys.workQueue())).toEqual([]);
  }, 120_000);

  it('leaves an evaluation that the next box takes over and finishes', async () => {
    const request: EvaluationRequestInput = {
      model: { kind: 'base', model: { preset: 'tiny', seed: 0 } },
      environment: { name: 'sudoku', options: { size: 4, blanks: 2 } },
      tasks: { split: 'eval', count: 2, seed: 1 },
      episodes: 2,
      concurrency: 2,
      generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 8 },
      timeoutMs: 30_000,
    };
    const id = (await call('POST', '/evaluations', request)).body.id as string;
    await killedMidClaim('evaluation');
    expect(EvaluationView.parse((await call('GET', `/evaluations/${id}`)).body).status.state).not.toBe('finished');
    expect(await box().pollOnce()).toEqual([{ kind: 'evaluation', id }]);
    const view = EvaluationView.parse((await call('GET', `/evaluations/${id}`)).body);
    expect(view.status).toMatchObject({ state: 'finished', planned: 2 });
    expect(view.episodes).toHaveLength(2);
    expect(await cloud.store.list(keys.workQueue())).toEqual([]);
  }, 120_000);

  it('leaves a model export that the next box takes over and makes', async () => {
    expect((await call('GET', `/runs/${run}/model?format=onnx`)).status).toBe(202);
    await killedMidClaim('export');
    const ran = await box().pollOnce((kind) => kind === 'export');
    expect(ran.map((w) => w.kind)).toEqual(['export']);
    const ready = await call('GET', `/runs/${run}/model?format=onnx`, undefined, { accept: 'application/json' });
    expect(ready).toMatchObject({ status: 200, body: { state: 'ready', iteration: 1 } });
    expect(await cloud.store.list(keys.workQueue())).toEqual([]);
  }, 120_000);
});

describe('a claimant that may be alive', () => {
  it('keeps its claim on another host while it beats, and the entry stays queued', async () => {
    const id = (await call('POST', '/runs', tinyRunConfig({ name: 'elsewhere', iterations: 1 }))).body.id as string;
    const now = new Date();
    const claim: WorkClaim = { kind: 'run', id, claimId: 'b'.repeat(32), claimedBy: 'ip-10-0-0-9:4242', claimedAt: new Date(now.getTime() - 3_600_000).toISOString(), heartbeatAt: now.toISOString() };
    await cloud.store.put(keys.workClaim('run', id), JSON.stringify(claim));
    expect(await box().pollOnce()).toEqual([]);
    expect(await cloud.store.get(keys.queuedWork('run', id))).not.toBeNull();
    expect(WorkClaim.parse(decode(await cloud.store.get(keys.workClaim('run', id))))).toEqual(claim);
    // Silent past the stale limit (its heartbeat and the run's status), the same claimant is gone: the next poll takes the run over and trains it.
    const silent = new Date(now.getTime() - 11 * 60_000).toISOString();
    await cloud.store.put(keys.workClaim('run', id), JSON.stringify({ ...claim, heartbeatAt: silent }));
    await cloud.store.put(keys.runStatus(id), JSON.stringify({ ...decode(await cloud.store.get(keys.runStatus(id))), updatedAt: silent }));
    expect(await box().pollOnce()).toEqual([{ kind: 'run', id }]);
    expect(RunDetail.parse((await call('GET', `/runs/${id}`)).body).state).toBe('finished');
  }, 120_000);
});

describe('a run under way whose queue entry is gone', () => {
  const state = async (id: string) => RunDetail.parse((await call('GET', `/runs/${id}`)).body).state;

  it('is resumed when its box died: queued afresh, claimed by the next box and finished', async () => {
    const id = (await call('POST', '/runs', tinyRunConfig({ name: 'entry-lost', iterations: 1, evalInterval: 1 }))).body.id as string;
    const dead = await killedMidClaim('run', { id, until: async () => (await state(id)) === 'running' });
    // The entry is lost (as when a box died after it went): no poll will ever look at the run again.
    await cloud.store.delete(keys.queuedWork('run', id));
    expect(await state(id)).toBe('running');
    expect(await box().pollOnce()).toEqual([]);
    const resumed = await call('POST', `/runs/${id}/resume`, {});
    expect(resumed, JSON.stringify(resumed.body)).toMatchObject({ status: 202, body: { id, state: 'requested', completedIterations: 0 } });
    // A fresh entry; the dead box's claim released.
    const entry = QueuedWork.parse(decode(await cloud.store.get(keys.queuedWork('run', id))));
    expect(Date.parse(entry.queuedAt)).toBeGreaterThan(Date.parse(dead.claimedAt));
    expect(await cloud.store.get(keys.workClaim('run', id))).toBeNull();
    expect(await box().pollOnce()).toEqual([{ kind: 'run', id }]);
    expect(RunDetail.parse((await call('GET', `/runs/${id}`)).body)).toMatchObject({ state: 'finished', completedIterations: 1 });
    expect(await cloud.store.list(keys.workQueue())).toEqual([]);
  }, 120_000);

  it('is refused while a claimant that may be alive holds it (naming it), and resumed once it is silent past the stale limit', async () => {
    const id = (await call('POST', '/runs', tinyRunConfig({ name: 'held', iterations: 1 }))).body.id as string;
    await cloud.store.delete(keys.queuedWork('run', id));
    const now = Date.now();
    const running = { ...decode(await cloud.store.get(keys.runStatus(id))), state: 'running', startedAt: new Date(now).toISOString(), updatedAt: new Date(now).toISOString() };
    await cloud.store.put(keys.runStatus(id), JSON.stringify(running));
    const claim: WorkClaim = { kind: 'run', id, claimId: 'c'.repeat(32), claimedBy: 'ip-10-0-0-7:4242', claimedAt: new Date(now - 3_600_000).toISOString(), heartbeatAt: new Date(now - 60_000).toISOString() };
    await cloud.store.put(keys.workClaim('run', id), JSON.stringify(claim));
    const refused = await call('POST', `/runs/${id}/resume`, { iterations: 2 });
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toMatch(/ip-10-0-0-7:4242 claimed it and was last seen at .*may still be running it/);
    // Nothing was touched: not the config, the status, the claim, nor the queue.
    expect(await state(id)).toBe('running');
    expect(RunConfig.parse(decode(await cloud.store.get(keys.config(id)))).iterations).toBe(1);
    expect(WorkClaim.parse(decode(await cloud.store.get(keys.workClaim('run', id))))).toEqual(claim);
    expect(await cloud.store.get(keys.queuedWork('run', id))).toBeNull();
    // A claim this very process runs is alive whatever its times say (a box in the API's own process).
    claimRunsHere(claim.claimId);
    const silent = new Date(now - 11 * 60_000).toISOString();
    await cloud.store.put(keys.workClaim('run', id), JSON.stringify({ ...claim, claimedBy: `${hostname()}:${process.pid}`, heartbeatAt: silent, claimedAt: silent }));
    await cloud.store.put(keys.runStatus(id), JSON.stringify({ ...running, updatedAt: silent }));
    expect((await call('POST', `/runs/${id}/resume`, {})).status).toBe(409);
    claimEndedHere(claim.claimId);
    // Silent past the stale limit (its heartbeat and the run's status), on another host: the claimant is gone.
    await cloud.store.put(keys.workClaim('run', id), JSON.stringify({ ...claim, heartbeatAt: silent }));
    const resumed = await call('POST', `/runs/${id}/resume`, { iterations: 2 });
    expect(resumed, JSON.stringify(resumed.body)).toMatchObject({ status: 202, body: { state: 'requested', iterations: 2, changes: ['iterations 1 → 2'] } });
    expect(await box().pollOnce()).toEqual([{ kind: 'run', id }]);
    expect(RunDetail.parse((await call('GET', `/runs/${id}`)).body)).toMatchObject({ state: 'finished', completedIterations: 2 });
  }, 120_000);

  it('is refused while its entry is queued: the box carries it on (or takes it over)', async () => {
    const id = (await call('POST', '/runs', tinyRunConfig({ name: 'queued', iterations: 1 }))).body.id as string;
    const refused = await call('POST', `/runs/${id}/resume`, {});
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toMatch(/queued for the trainer box/);
    expect(await box().pollOnce()).toEqual([{ kind: 'run', id }]);
    expect(await state(id)).toBe('finished');
  }, 120_000);
});
