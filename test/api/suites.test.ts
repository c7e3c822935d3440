/**
 * Task suites through the HTTP API: `POST /runs` and `POST /evaluations` pin a named suite to its manifest
 * when they are created (a later push under the name changes neither), and answer 400 at the field for an
 * unknown suite, an unknown manifest, or a split with fewer tasks than the request draws from it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { pushSuite } from '../../environments/task-suites/push-suite.ts';
import { suiteSplitOf, suiteTaskId } from '../../environments/task-suites/suite-splits.ts';
import { keys } from '../../shared/keys.ts';
import { EvaluationView, IterationManifest, RunConfig, StoredEvaluationRequest } from '../../shared/schemas/index.ts';
import { readJson } from '../../shared/store/json.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { startTestApi, tinyRunConfig, waitFor, type TestApi } from './helpers.ts';

const OPTIONS = { size: 4, blanks: 2, shapedReward: true } as const;
let api: TestApi;
let store: FsObjectStore;

/** 4×4 sudoku tasks from both halves of the hash, so every split of the suite has some. */
function jsonl(seed: number, n: number): { text: string; tasks: unknown[] } {
  const options = sudoku.optionsSchema.parse(OPTIONS);
  const tasks = [...sudoku.sampleTasks('train', n, seed, options), ...sudoku.sampleTasks('eval', n, seed, options)].map((t) => t.task);
  return { text: tasks.map((t) => JSON.stringify(t)).join('\n'), tasks };
}

const paths = (body: { error: { issues: { path: string }[] } }) => body.error.issues.map((i) => i.path);

beforeAll(async () => {
  api = await startTestApi();
  store = new FsObjectStore(api.storeRoot);
});
afterAll(async () => api?.dispose());

describe('task suites over the API', () => {
  it('400 at the field: an unknown suite, an unknown manifest, a split too small for the request', async () => {
    const few = (await pushSuite(store, { name: 'few', environment: 'sudoku', text: jsonl(21, 3).text })).record;

    const unknown = await api.call('POST', '/runs', { body: tinyRunConfig({ tasks: { suite: 'nobody', trainPerIteration: 1, evalCount: 1 } }) });
    expect(unknown.status).toBe(400);
    expect(paths(unknown.body)).toEqual(['tasks.suite.name']);
    expect(unknown.body.error.message).toMatch(/esopt tasks push/);

    const tooMany = await api.call('POST', '/runs', { body: tinyRunConfig({ tasks: { suite: 'few', trainPerIteration: few.splits.train + 1, evalCount: few.splits.eval + 1 } }) });
    expect(tooMany.status).toBe(400);
    expect(paths(tooMany.body)).toEqual(['tasks.trainPerIteration', 'tasks.evalCount']);
    expect(tooMany.body.error.message).toContain(`has ${few.splits.train} train task(s)`);

    const evaluation = (tasks: unknown) => ({ model: { kind: 'base', model: { preset: 'tiny', seed: 0 } }, environment: { name: 'sudoku', options: OPTIONS }, tasks, episodes: 2 });
    const bigCount = await api.call('POST', '/evaluations', { body: evaluation({ suite: 'few', split: 'validation', count: few.splits.validation + 1 }) });
    expect(bigCount.status).toBe(400);
    expect(paths(bigCount.body)).toEqual(['tasks.count']);
    const badManifest = await api.call('POST', '/evaluations', { body: evaluation({ suite: { name: 'few', manifest: 'a'.repeat(64) }, split: 'eval', count: 1 }) });
    expect(paths(badManifest.body)).toEqual(['tasks.suite.manifest']);
    const noName = await api.call('POST', '/evaluations', { body: evaluation({ suite: 'nobody', split: 'eval', count: 1 }) });
    expect(paths(noName.body)).toEqual(['tasks.suite.name']);
    // Nothing was stored for any of them.
    expect(await store.list('evaluations/')).toEqual([]);
    expect(await store.list('runs/')).toEqual([]);
  });

  it('pins the suite at creation: an evaluation and a run keep the first manifest through a re-push', async () => {
    const first = jsonl(31, 10);
    const pushed = (await pushSuite(store, { name: 'mine', environment: 'sudoku', text: first.text })).record;
    const evalIds = new Set(first.tasks.filter((t) => suiteSplitOf(t) === 'eval').map((t) => suiteTaskId('mine', t)));
    const trainIds = new Set(first.tasks.filter((t) => suiteSplitOf(t) === 'train').map((t) => suiteTaskId('mine', t)));

    const evaluation = await api.call('POST', '/evaluations', {
      body: { model: { kind: 'base', model: { preset: 'tiny', seed: 0 } }, environment: { name: 'sudoku', options: OPTIONS }, tasks: { suite: 'mine', split: 'eval', count: 2, seed: 4 }, episodes: 2, concurrency: 1, generation: { maxTokens: 8 } },
    });
    expect(evaluation.status).toBe(202);
    const run = await api.call('POST', '/runs', { body: tinyRunConfig({ tasks: { suite: 'mine', seed: 1, trainPerIteration: 2, evalCount: 2 }, iterations: 1, evalInterval: 1, checkpointInterval: 1 }) });
    expect(run.status).toBe(201);
    // A push of other tasks under the same name, while both are under way.
    const again = (await pushSuite(store, { name: 'mine', environment: 'sudoku', text: jsonl(37, 10).text })).record;
    expect(again.manifestSha256).not.toBe(pushed.manifestSha256);

    const request = await readJson(store, keys.evaluationRequest(evaluation.body.id), StoredEvaluationRequest);
    expect(request?.tasks).toMatchObject({ suite: { name: 'mine', manifest: pushed.manifestSha256 } });
    const view = await waitFor(async () => {
      const v = EvaluationView.parse((await api.call('GET', `/evaluations/${evaluation.body.id}`)).body);
      return v.status.state === 'finished' || v.status.state === 'failed' ? v : undefined;
    }, 90_000, 'the evaluation');
    expect(view.status.state).toBe('finished');
    expect(view.episodes).toHaveLength(2);
    for (const e of view.episodes) expect(evalIds.has(e.task), e.task).toBe(true);

    const config = await readJson(store, keys.config(run.body.id), RunConfig);
    expect(config?.tasks.suite).toEqual({ name: 'mine', manifest: pushed.manifestSha256 });
    await waitFor(async () => ((await api.call('GET', `/runs/${run.body.id}`)).body.status?.state === 'finished' ? true : undefined), 90_000, 'the run');
    const manifest = await readJson(store, keys.manifest(run.body.id, 0), IterationManifest);
    expect(manifest?.suite).toEqual({ name: 'mine', manifest: pushed.manifestSha256 });
    for (const t of manifest!.tasks) expect(trainIds.has(t.id), t.id).toBe(true);
  }, 180_000);
});
