/**
 * `targets` over the HTTP API (the local API, its launcher over runEmbedded): a malformed pattern is a 400
 * naming its path and creates nothing; a well-formed pattern that matches no tensor of the model is known
 * once the model is open, so the run is created and fails at its start with the pattern in status.error.
 * `noise: 'esopt-device-noise'` outside full mode is a 400 at `noise`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunDetail } from '../../shared/schemas/index.ts';
import { startTestApi, tinyRunConfig, type TestApi } from './helpers.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api?.dispose();
});

describe('POST /runs with targets', () => {
  it('answers 400 at the path of a pattern that is not a regular expression', async () => {
    const bad = await api.call('POST', '/runs', { body: tinyRunConfig({ targets: { include: ['q_proj', '(v_proj'] } }) });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues[0]).toMatchObject({ path: 'targets.include.1' });
    expect(bad.body.error.issues[0].message).toMatch(/not a valid regular expression/);
    expect((await api.call('GET', '/runs')).body.runs).toEqual([]);
  });

  it("answers 400 at `noise` for the device noise outside full mode", async () => {
    const bad = await api.call('POST', '/runs', { body: tinyRunConfig({ mode: 'lowrank', noise: 'esopt-device-noise' }) });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues[0]).toMatchObject({ path: 'noise' });
    expect(bad.body.error.issues[0].message).toMatch(/"esopt-device-noise" is for mode "full" \(this run's mode is "lowrank"\)/);
    expect((await api.call('GET', '/runs')).body.runs).toEqual([]);
  });

  it('fails the run at its start when a pattern names no tensor of the model', async () => {
    const created = await api.call('POST', '/runs', { body: tinyRunConfig({ targets: { include: 'all-linear', exclude: ['q_prj'] } }) });
    expect(created.status).toBe(201);
    await api.runs.settled();
    const detail = RunDetail.parse((await api.call('GET', `/runs/${created.body.id}`)).body);
    expect(detail.status?.state).toBe('failed');
    expect(detail.status?.error).toMatch(/targets\.exclude\[0\]: "q_prj" matches none of full mode's tensors: model\.embed_tokens\.weight/);
    expect(detail.completedIterations).toBe(0);
  }, 60_000);

  it('takes a pattern that backtracks for hours in V8 and fails the run at once, the API answering meanwhile', async () => {
    // `^([a-z0-9_.]+)+!` takes V8 over a minute on a 33-character name; the DFA walks each name once.
    const created = await api.call('POST', '/runs', { body: tinyRunConfig({ targets: { include: ['^([a-z0-9_.]+)+!'] } }) });
    expect(created.status).toBe(201);
    const started = Date.now();
    await api.runs.settled();
    expect((await api.call('GET', '/healthz')).status).toBe(200);
    const detail = RunDetail.parse((await api.call('GET', `/runs/${created.body.id}`)).body);
    expect(detail.status?.state).toBe('failed');
    expect(detail.status?.error).toMatch(/targets\.include\[0\]: "\^\(\[a-z0-9_\.\]\+\)\+!" matches none/);
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 60_000);

  it('answers 400 at the path of a pattern that cannot be searched in linear time', async () => {
    const bad = await api.call('POST', '/runs', { body: tinyRunConfig({ targets: { include: ['q_proj'], exclude: ['(?<=self_attn\\.)q'] } }) });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues[0]).toMatchObject({ path: 'targets.exclude.0' });
    expect(bad.body.error.issues[0].message).toMatch(/cannot be searched in linear time: lookarounds/);
  });
});
