/**
 * POST /runs/{id}/resume over the real local API (hono, the local launcher, an fs store): a run stopped at
 * its budget goes on with a larger one, a finished run is extended, a run stopped on request goes on, and
 * each reaches exactly the θ of a run that never stopped; the refusals name their reason or field.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { ResumeAccepted, RunDetail, type RunConfigInput } from '../../shared/schemas/index.ts';
import { baseConfig } from '../training/helpers/killable-run.ts';
import { startTestApi, waitFor, type TestApi } from './helpers.ts';

let api: TestApi;

// Seeded scripted rewards, and σ/α schedules that do not depend on the run's length, so a run extended
// from 3 to 5 iterations is the same run as one of 5 from the start.
const config = (overrides: Partial<RunConfigInput> = {}): RunConfigInput =>
  ({
    ...baseConfig,
    es: { population: 4, sigma: 0.05, alpha: { schedule: 'step', initial: 0.05, factor: 0.5, every: 2, warmup: 1 }, weightDecay: 0.01 },
    tasks: { seed: 3, trainPerIteration: 1, evalCount: 1 },
    iterations: 5,
    evalInterval: 100,
    checkpointInterval: 2,
    ...overrides,
  }) as RunConfigInput;

const storeJson = (key: string) => JSON.parse(readFileSync(join(api.storeRoot, ...key.split('/')), 'utf8'));
const detail = async (id: string) => RunDetail.parse((await api.call('GET', `/runs/${id}`)).body);
const create = async (c: RunConfigInput) => {
  const res = await api.call('POST', '/runs', { body: c });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id as string;
};

let full: string;
let fullTheta: string;

beforeAll(async () => {
  api = await startTestApi();
  full = await create(config({ name: 'full' }));
  await api.runs.settled();
  const d = await detail(full);
  expect(d).toMatchObject({ state: 'finished', completedIterations: 5 });
  fullTheta = d.latest!.thetaHashAfter;
}, 60_000);

afterAll(async () => {
  await api?.dispose();
});

describe('POST /runs/{id}/resume', () => {
  it('goes on with a run stopped at its budget, with a larger one, to the θ of the run that never stopped', async () => {
    // 4 members × 1 task: 4 episodes an iteration; 10 allows two, not a third
    const cut = await create(config({ name: 'cut', budget: { maxEpisodes: 10, maxHours: 5 } }));
    // the launcher marks it running before POST /runs answers
    expect(await api.call('POST', `/runs/${cut}/resume`, { body: { budget: { maxEpisodes: 100 } } })).toMatchObject({ status: 409, body: { error: { code: 'run_active' } } });
    await api.runs.settled();
    const stopped = await detail(cut);
    expect(stopped).toMatchObject({ state: 'stopped', completedIterations: 2, status: { stopReason: expect.stringContaining('maxEpisodes 10') } });

    // refused, nothing written: the config stays as it was
    const low = await api.call('POST', `/runs/${cut}/resume`, { body: { iterations: 1 } });
    expect(low).toMatchObject({ status: 400, body: { error: { issues: [{ path: 'iterations', message: expect.stringContaining('below the 2 iterations') }] } } });
    const bad = await api.call('POST', `/runs/${cut}/resume`, { body: { budget: { maxCostUsd: -1, maxDollars: 3 }, iterations: 2.5 } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues.map((i: { path: string }) => i.path)).toEqual(expect.arrayContaining(['budget.maxCostUsd', 'iterations']));
    expect(bad.body.error.issues.some((i: { message: string }) => i.message.includes('maxDollars'))).toBe(true);
    expect(storeJson(keys.config(cut)).budget).toEqual({ maxEpisodes: 10, maxHours: 5 });

    const headers = { 'idempotency-key': 'resume-cut-1' };
    const res = await api.call('POST', `/runs/${cut}/resume`, { body: { budget: { maxEpisodes: 100, maxHours: null } }, headers });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(ResumeAccepted.parse(res.body)).toEqual({
      id: cut,
      state: 'running',
      completedIterations: 2,
      iterations: 5,
      budget: { maxEpisodes: 100 },
      changes: ['budget.maxEpisodes 10 → 100', 'budget.maxHours 5 → none'],
    });
    expect(storeJson(keys.config(cut)).budget).toEqual({ maxEpisodes: 100 });
    // a retry with the same key is the same answer, and starts nothing again
    const again = await api.call('POST', `/runs/${cut}/resume`, { body: { budget: { maxEpisodes: 100, maxHours: null } }, headers });
    expect(again.status).toBe(202);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    await api.runs.settled();

    const done = await detail(cut);
    expect(done).toMatchObject({ state: 'finished', completedIterations: 5, status: { stopReason: null, error: null } });
    expect(done.latest!.thetaHashAfter).toBe(fullTheta);
    // the log went on where it stopped: one entry an iteration, no iteration twice
    const log = readFileSync(join(api.storeRoot, ...keys.log(cut).split('/')), 'utf8').trim().split('\n').map((l) => JSON.parse(l).iteration);
    expect(log).toEqual([0, 1, 2, 3, 4]);
  }, 30_000);

  it('extends a finished run by more iterations, to the θ of a run that long from the start', async () => {
    const short = await create(config({ name: 'short', iterations: 3 }));
    await api.runs.settled();
    expect(await detail(short)).toMatchObject({ state: 'finished', completedIterations: 3 });
    const same = await api.call('POST', `/runs/${short}/resume`);
    expect(same).toMatchObject({ status: 400, body: { error: { issues: [{ path: 'iterations', message: expect.stringContaining('finished all its 3 iterations') }] } } });

    const res = await api.call('POST', `/runs/${short}/resume`, { body: { iterations: 5 } });
    expect(res).toMatchObject({ status: 202, body: { completedIterations: 3, iterations: 5, changes: ['iterations 3 → 5'] } });
    await api.runs.settled();
    const done = await detail(short);
    expect(done).toMatchObject({ state: 'finished', completedIterations: 5, iterations: 5 });
    expect(done.latest!.thetaHashAfter).toBe(fullTheta);
    expect(storeJson(keys.evaluationOf(short, 5)).iteration).toBe(5);
  }, 30_000);

  it('goes on with a run stopped on request: its stop request is cleared, so it does not stop again at once', async () => {
    const long = await create(config({ name: 'long', iterations: 300 }));
    await waitFor(async () => (existsSync(join(api.storeRoot, ...keys.metricsRow(long, 0).split('/'))) ? true : undefined), 20_000, 'the first iteration');
    expect((await api.call('POST', `/runs/${long}/stop`)).status).toBe(202);
    await api.runs.settled();
    const stopped = await detail(long);
    expect(stopped).toMatchObject({ state: 'stopped', stopRequested: true });
    const completed = stopped.completedIterations;

    const res = await api.call('POST', `/runs/${long}/resume`, { body: { iterations: completed + 1 } });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect((await detail(long)).stopRequested).toBe(false);
    await api.runs.settled();
    expect(await detail(long)).toMatchObject({ state: 'finished', completedIterations: completed + 1, stopRequested: false });
  }, 30_000);

  it('answers 404 for an unknown run and 400 for a malformed id or body', async () => {
    expect(await api.call('POST', '/runs/no-such-run/resume')).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    expect((await api.call('POST', '/runs/.hidden/resume')).body.error.issues[0].path).toBe('id');
    expect(await api.call('POST', `/runs/${full}/resume`, { body: '{"iterations": ' })).toMatchObject({ status: 400, body: { error: { code: 'invalid_json' } } });
  });
});
