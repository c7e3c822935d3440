/**
 * One ES run in process with real parts (filesystem store, the local worker pool running the Episode
 * function with the seeded random sudoku policy, the tiny ONNX engine holding θ), where iteration 0's
 * prefix already holds a failed record, an unreadable one, one from a member the manifest does not have,
 * and a valid one: what counts, what is reported, what is never re-dispatched, and that a record landing
 * after the update — or delivered twice — is kept but never counted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import type { Fanout } from '../../shared/ports/fanout.ts';
import { EvaluationResult, MetricsRow, RewardRecord, RunConfig, UpdateRecord } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { loadEnvironment } from '../../environments/index.ts';
import type { EnvironmentDefinition } from '../../environments/environment.ts';
import type { Engine } from '../../trainer/engine/engine.ts';
import { LocalFanout } from '../../trainer/fanout/local.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { resolveModelSpec } from '../../trainer/training/model-store/resolve-model.ts';
import { iterationTaskSeed } from '../../trainer/training/loop/task-seed.ts';
import { train, type TrainingOptions } from '../../trainer/training/loop/training.ts';
import { iterationRequests } from '../../trainer/fanout/iteration-requests.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-train-'));
const store = new FsObjectStore(root);
const run = 'collect';
const config = RunConfig.parse({
  environment: { name: 'sudoku', options: { size: 4, blanks: 4, shapedReward: true, invalidMove: 'waste' } },
  tasks: { seed: 3, trainPerIteration: 2, evalCount: 3 },
  model: { preset: 'tiny', seed: 2 },
  es: { population: 4, sigma: 0.05, alpha: 0.05 },
  iterations: 2,
  evalInterval: 1,
  checkpointInterval: 1,
  policy: 'scripted:random',
  workers: 1,
  deadlineMs: 60_000,
  seed: 5,
});
let engine: Engine;
let fanout: LocalFanout;
let sudoku: EnvironmentDefinition;
let options: TrainingOptions;
let taskA: string;
let taskB: string;

const json = async <T>(key: string, schema: { parse: (v: unknown) => T }): Promise<T> => schema.parse(JSON.parse(new TextDecoder().decode((await store.get(key))!)));

function record(member: number, task: string, reward: number, error: string | null): RewardRecord {
  return {
    run,
    iteration: 0,
    member,
    task,
    reward,
    steps: 3,
    tokens: { prompt: 0, completion: 0 },
    durations: { episodeMs: 1, inferenceMs: 0 },
    cost: { usd: 0, lambdaGbSeconds: 0, gpuSeconds: 0 },
    error,
    transcriptKey: null,
    writtenAt: new Date().toISOString(),
  };
}

beforeAll(async () => {
  sudoku = await loadEnvironment('sudoku');
  engine = await createEngine({ model: await resolveModelSpec(config.model, store), mode: 'full' });
  fanout = new LocalFanout({ workers: 1, store: { kind: 'fs', root } });
  options = { run, config, store, fanout, weights: engine, population: engine, policy: { baseUrl: 'scripted:random' }, environment: sudoku, pollMs: 20 };
  [taskA, taskB] = sudoku.sampleTasks('train', 2, iterationTaskSeed(config.tasks.seed, 0), sudoku.optionsSchema.parse(config.environment.options)).map((t) => t.id);
  await store.put(keys.reward(run, 0, 0, taskA), JSON.stringify(record(0, taskA, 0.9, 'the environment crashed')), { ifAbsent: true });
  await store.put(keys.reward(run, 0, 1, taskA), '{"not json', { ifAbsent: true });
  await store.put(keys.reward(run, 0, 2, taskA), JSON.stringify(record(2, taskA, 0.75, null)), { ifAbsent: true });
  await store.put(keys.reward(run, 0, 9, taskA), JSON.stringify(record(9, taskA, 1, null)), { ifAbsent: true });
});
afterAll(async () => {
  await fanout?.close();
  await engine?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('an ES iteration with failed, invalid, foreign, pre-existing, late and duplicate records', () => {
  let finalHash: string;

  it('counts each usable (member, task) once and accounts for the rest', async () => {
    const result = await train(options);
    finalHash = result.thetaHash;
    const u = await json(keys.update(run, 0), UpdateRecord);
    const counted = u.counted.map((c) => `${c.member}/${c.task}`).sort();
    expect(counted).toEqual([`0/${taskB}`, `1/${taskB}`, `2/${taskA}`, `2/${taskB}`, `3/${taskA}`, `3/${taskB}`].sort());
    expect(u.ignored).toEqual({ duplicates: 0, failed: 1, invalid: 2 });
    expect(u.failures).toEqual([{ member: 0, task: taskA, error: 'the environment crashed' }]);
    expect(u.invalidRecords.map((r) => r.key).sort()).toEqual([keys.reward(run, 0, 1, taskA), `9/${taskA}`].sort());
    // The pre-existing record was not re-dispatched (a worker would have overwritten nothing, but also not run).
    const r2a = await json(keys.reward(run, 0, 2, taskA), RewardRecord);
    expect(r2a.reward).toBe(0.75);
    const r2b = await json(keys.reward(run, 0, 2, taskB), RewardRecord);
    expect(u.memberRewards.find((m) => m.member === 2)!.reward).toBe((0.75 + r2b.reward) / 2);
    // A failed episode is not a zero: member 0's reward is its one good episode.
    const r0b = await json(keys.reward(run, 0, 0, taskB), RewardRecord);
    expect(u.memberRewards.find((m) => m.member === 0)!.reward).toBe(r0b.reward);
    expect(u.thetaHashBefore).not.toBe(u.thetaHashAfter);
  });

  it('writes a metrics row per iteration and the evaluations', async () => {
    for (let k = 0; k < config.iterations; k++) {
      const row = await json(keys.metricsRow(run, k), MetricsRow);
      expect(row.iteration).toBe(k);
      expect(row.expected).toBe(8);
      expect(row.durations.total).toBeGreaterThan(0);
      expect(row.evaluation?.iteration).toBe(k);
    }
    const row0 = await json(keys.metricsRow(run, 0), MetricsRow);
    expect(row0).toMatchObject({ counted: 6, failed: 1, invalid: 2 });
    const final = await json(keys.evaluationOf(run, config.iterations), EvaluationResult);
    expect(final.tasks).toBe(3);
    expect(final.interval.low).toBeLessThanOrEqual(final.successRate);
    expect(final.interval.high).toBeGreaterThanOrEqual(final.successRate);
  });

  it('a late record and a duplicate delivery are kept but never counted', async () => {
    const before = await json(keys.update(run, 0), UpdateRecord);
    // A slow worker's record for the pair that had no usable one lands after the update…
    await store.delete(keys.reward(run, 0, 1, taskA));
    expect(await store.put(keys.reward(run, 0, 1, taskA), JSON.stringify(record(1, taskA, 1, null)), { ifAbsent: true })).toBe(true);
    // …and Lambda's at-least-once delivery runs iteration 0's episodes again.
    const again = iterationRequests({ run, iteration: 0, runSeed: config.seed, members: [0, 1, 2, 3], tasks: (await json(keys.manifest(run, 0), { parse: (v) => v as { tasks: Array<{ id: string; task: unknown }> } })).tasks, environment: config.environment, policy: { baseUrl: 'scripted:random' }, generation: config.generation, deadline: new Date(Date.now() + 60_000) });
    const outcomes = await fanout.dispatch(again, { concurrency: 1, timeoutMs: 60_000 });
    expect(outcomes.every((o) => o.ok)).toBe(true);
    expect((await json(keys.reward(run, 0, 2, taskA), RewardRecord)).reward).toBe(0.75);
    // Resuming the finished run replays the log; nothing is re-collected or re-counted.
    const result = await train(options);
    expect(result.thetaHash).toBe(finalHash);
    expect(hashTheta(engine.segments())).toBe(finalHash);
    expect(await json(keys.update(run, 0), UpdateRecord)).toEqual(before);
    expect((await json(keys.reward(run, 0, 1, taskA), RewardRecord)).reward).toBe(1);
  });
});

describe('the metrics row counts missing and timed-out episodes apart from failures', () => {
  it('an episode the fan-out gave up on for time is timedOut; one it could not dispatch is only missing', async () => {
    const timeoutRun = 'timeouts';
    // Of iteration 0's 8 episodes: two run out of time, one is refused by the fan-out, one times out
    // but its record still lands before the close (not missing), the rest write records.
    const fake: Fanout = {
      async dispatch(requests) {
        return Promise.all(
          requests.map(async (request, i) => {
            const write = () => store.put(keys.reward(request.run, request.iteration, request.member, request.task.id), JSON.stringify({ ...record(0, request.task.id, 0.5, null), run: request.run, iteration: request.iteration, member: request.member }), { ifAbsent: true });
            if (request.member === 'base' || request.iteration > 0) return (await write(), { request, ok: true });
            if (i === 1 || i === 4) return { request, ok: false, error: 'timed out after 60000 ms: the worker was killed', timedOut: true };
            if (i === 6) return { request, ok: false, error: 'gave up after 9 attempts: TooManyRequestsException' };
            await write();
            return i === 2 ? { request, ok: false, error: 'accepted, but no record within 60000 ms', timedOut: true } : { request, ok: true };
          }),
        );
      },
      close: async () => {},
    };
    await train({ ...options, run: timeoutRun, config: { ...config, iterations: 1 }, fanout: fake });
    const row = await json(keys.metricsRow(timeoutRun, 0), MetricsRow);
    expect(row).toMatchObject({ expected: 8, counted: 5, failed: 0, invalid: 0, missing: 3, timedOut: 2 });
  });
});
