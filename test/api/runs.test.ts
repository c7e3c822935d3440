/**
 * The runs routes over a real tiny training run: POST /runs starts the ES loop in this process (the
 * local launcher over runEmbedded), and every GET is checked against the records the loop wrote.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { CheckpointMeta, EvaluationView, MetricsRow, RewardRecord, RunDetail, RunEvent, RunList } from '../../shared/schemas/index.ts';
import { readSse, startTestApi, tinyRunConfig, TOKEN, waitFor, type TestApi } from './helpers.ts';

let api: TestApi;
let run: string;

const storeJson = (key: string) => JSON.parse(readFileSync(join(api.storeRoot, ...key.split('/')), 'utf8'));
const runIdsInStore = () => readdirSync(join(api.storeRoot, 'runs')).filter((d) => existsSync(join(api.storeRoot, 'runs', d, 'config.json')));

beforeAll(async () => {
  api = await startTestApi();
  // Two racing retries of one request: the Idempotency-Key lets exactly one of them create a run.
  const headers = { 'idempotency-key': 'create-tiny-1' };
  const [a, b] = await Promise.all([api.call('POST', '/runs', { body: tinyRunConfig(), headers }), api.call('POST', '/runs', { body: tinyRunConfig(), headers })]);
  const created = [a, b].filter((r) => r.status === 201);
  expect(created.length).toBeGreaterThanOrEqual(1);
  for (const other of [a, b].filter((r) => r.status !== 201)) expect(other).toMatchObject({ status: 409, body: { error: { code: 'idempotency_in_progress' } } });
  run = created[0].body.id;
  for (const r of created) expect(r.body.id).toBe(run);
  await api.runs.settled();
}, 120_000);

afterAll(async () => {
  await api?.dispose();
});

describe('POST /runs', () => {
  it('created one run and trained it to the end', async () => {
    expect(runIdsInStore()).toEqual([run]);
    const detail = RunDetail.parse((await api.call('GET', `/runs/${run}`)).body);
    expect(detail).toMatchObject({ id: run, name: 'tiny', state: 'finished', completedIterations: 3, iterations: 3, current: null, stopRequested: false });
    expect(detail.config).toEqual(storeJson(keys.config(run)));
    expect(detail.latest).toEqual(storeJson(keys.metricsRow(run, 2)));
    expect(detail.status?.startedAt).not.toBeNull();
  });

  it('replays the stored response for the same Idempotency-Key and body, refuses another body with 422', async () => {
    const again = await api.call('POST', '/runs', { body: tinyRunConfig(), headers: { 'idempotency-key': 'create-tiny-1' } });
    expect(again.status).toBe(201);
    expect(again.body).toEqual({ id: run });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const other = await api.call('POST', '/runs', { body: tinyRunConfig({ iterations: 4 }), headers: { 'idempotency-key': 'create-tiny-1' } });
    expect(other).toMatchObject({ status: 422, body: { error: { code: 'idempotency_key_reused' } } });
    expect(runIdsInStore()).toEqual([run]);
  });

  it('answers 400 with every failing field path, and creates nothing', async () => {
    const bad = await api.call('POST', '/runs', { body: { ...tinyRunConfig(), es: { population: 1, sigma: -1, alpha: 0.1 }, bogus: true } });
    expect(bad.status).toBe(400);
    const paths = bad.body.error.issues.map((i: { path: string }) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['es.population', 'es.sigma']));
    expect(bad.body.error.issues.some((i: { message: string }) => i.message.includes('bogus'))).toBe(true);

    const options = await api.call('POST', '/runs', { body: tinyRunConfig({ environment: { name: 'sudoku', options: { size: 5 } } }) });
    expect(options.status).toBe(400);
    expect(options.body.error.issues[0].path).toBe('environment.options.size');

    const json = await api.call('POST', '/runs', { body: '{"environment": ' });
    expect(json).toMatchObject({ status: 400, body: { error: { code: 'invalid_json' } } });
    expect(runIdsInStore()).toEqual([run]);
  });
});

describe('GET routes read what the loop wrote', () => {
  it('GET /runs lists the run with its latest row', async () => {
    const { runs } = RunList.parse((await api.call('GET', '/runs')).body);
    expect(runs.map((r) => r.id)).toEqual([run]);
    expect(runs[0].latest).toEqual(storeJson(keys.metricsRow(run, 2)));
  });

  it('GET /runs/{id}/metrics is the series of metrics rows and evaluations', async () => {
    const { body, status } = await api.call('GET', `/runs/${run}/metrics`);
    expect(status).toBe(200);
    expect(body.rows).toEqual([0, 1, 2].map((k) => MetricsRow.parse(storeJson(keys.metricsRow(run, k)))));
    // evalInterval 2 over 3 iterations: θ_0, θ_2 and the final θ_3.
    expect(body.evaluations.map((e: { iteration: number }) => e.iteration)).toEqual([0, 2, 3]);
    expect(body.evaluations[2]).toEqual(storeJson(keys.evaluationOf(run, 3)));
    expect(body.rows.every((r: MetricsRow) => r.tokens.completion > 0 && r.counted === 2)).toBe(true);
  });

  it('GET /runs/{id}/checkpoints lists the verified checkpoints the loop wrote', async () => {
    const { body } = await api.call('GET', `/runs/${run}/checkpoints`);
    expect(body.checkpoints.map((c: CheckpointMeta) => c.iteration)).toEqual([2, 3]);
    expect(body.checkpoints[1]).toEqual(storeJson(keys.checkpointMeta(run, 3)));
  });

  it('GET /runs/{id}/events replays the run as server-sent events and ends', async () => {
    const res = await fetch(`${api.url}/runs/${run}/events`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = await readSse(res);
    for (const e of events) expect(e.event).toBe(RunEvent.parse(e.data).type);
    const applied = events.filter((e) => e.event === 'update-applied').map((e) => e.data.row);
    expect(applied).toEqual([0, 1, 2].map((k) => storeJson(keys.metricsRow(run, k))));
    expect(events.filter((e) => e.event === 'evaluation').map((e) => e.data.iteration)).toEqual([0, 2, 3]);
    expect(events[0]).toMatchObject({ event: 'status', data: { status: { state: 'finished' } } });
    expect(events.at(-1)).toEqual({ event: 'end', data: { type: 'end', state: 'finished' } });
  });

  it('answers 404 for unknown ids and 400 for malformed ones on every run route', async () => {
    for (const [method, path] of [
      ['GET', '/runs/no-such-run'],
      ['GET', '/runs/no-such-run/metrics'],
      ['GET', '/runs/no-such-run/checkpoints'],
      ['GET', '/runs/no-such-run/events'],
      ['POST', '/runs/no-such-run/stop'],
    ] as const) {
      expect(await api.call(method, path), `${method} ${path}`).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    }
    const malformed = await api.call('GET', '/runs/.hidden');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.issues[0].path).toBe('id');
  });
});

describe('POST /runs/{id}/stop', () => {
  it('stops a long run at the end of its current iteration, leaving every finished iteration complete', async () => {
    const long = tinyRunConfig({ name: 'long', iterations: 500, evalInterval: 1000, checkpointInterval: 1000 });
    const { body } = await api.call('POST', '/runs', { body: long });
    const id = body.id as string;
    await waitFor(async () => (existsSync(join(api.storeRoot, ...keys.metricsRow(id, 0).split('/'))) ? true : undefined), 60_000, 'the first iteration');
    const stop = await api.call('POST', `/runs/${id}/stop`);
    expect(stop).toMatchObject({ status: 202, body: { id, state: 'stopping', stopRequested: true } });
    await api.runs.settled();

    const detail = RunDetail.parse((await api.call('GET', `/runs/${id}`)).body);
    expect(detail.state).toBe('stopped');
    expect(detail.stopRequested).toBe(true);
    expect(detail.completedIterations).toBeGreaterThanOrEqual(1);
    expect(detail.completedIterations).toBeLessThan(500);
    // Clean: every iteration with a metrics row has its update record and its log line, and nothing more started.
    const log = readFileSync(join(api.storeRoot, ...keys.log(id).split('/')), 'utf8').trim().split('\n');
    expect(log).toHaveLength(detail.completedIterations);
    for (let k = 0; k < detail.completedIterations; k++) expect(storeJson(keys.update(id, k)).iteration).toBe(k);
    expect(existsSync(join(api.storeRoot, ...keys.manifest(id, detail.completedIterations).split('/')))).toBe(false);

    expect(await api.call('POST', `/runs/${id}/stop`)).toMatchObject({ status: 409, body: { error: { code: 'run_over' } } });
  });
});

describe('evaluating a run\'s checkpoint', () => {
  it('serves θ_2 from the checkpoint: greedy episodes use exactly the tokens the loop\'s own evaluation of θ_2 used', async () => {
    const config = tinyRunConfig();
    const post = await api.call('POST', '/evaluations', {
      body: {
        model: { kind: 'checkpoint', run, iteration: 2 },
        environment: config.environment,
        tasks: { split: 'eval', count: 2, seed: 1 },
        episodes: 2,
        generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 8 },
      },
    });
    expect(post.status).toBe(202);
    await api.evaluations.settled();
    const view = EvaluationView.parse((await api.call('GET', `/evaluations/${post.body.id}`)).body);
    expect(view.status).toMatchObject({ state: 'finished', stopReason: 'completed' });
    expect(view.episodes).toHaveLength(2);
    for (const e of view.episodes) {
      const loops = RewardRecord.parse(storeJson(keys.reward(run, 2, 'base', e.task)));
      expect(e.tokens).toEqual(loops.tokens);
      expect(e.reward).toBe(loops.reward);
      expect(e.steps).toBe(loops.steps);
    }
    const missing = await api.call('POST', '/evaluations', {
      body: { model: { kind: 'checkpoint', run, iteration: 1 }, environment: config.environment, tasks: { split: 'eval', count: 1 }, episodes: 1 },
    });
    expect(missing).toMatchObject({ status: 422, body: { error: { code: 'no_checkpoint' } } });
  });
});
