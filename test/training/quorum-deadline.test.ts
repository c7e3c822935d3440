/**
 * The loop's close with quorum < 1: past the deadline it closes as soon as the quorum is counted, not
 * before the deadline even when the quorum is in early, and a record that lands after the close (a
 * straggler finishing as it is stopped, a second delivery) stays in the store but never counts, neither
 * live nor on resume. A scripted fan-out writes records on a schedule around the deadline; a store that
 * lists every key twice checks that a (member, task) counts once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import type { DispatchOutcome, Fanout } from '../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { MetricsRow, RewardRecord, RunConfig, UpdateRecord, type EpisodeRequest } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { loadEnvironment } from '../../environments/index.ts';
import type { EnvironmentDefinition } from '../../environments/environment.ts';
import type { Engine } from '../../trainer/engine/engine.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { resolveModelSpec } from '../../trainer/training/model-store/resolve-model.ts';
import { iterationTaskSeed } from '../../trainer/training/loop/task-seed.ts';
import { train, type TrainingOptions } from '../../trainer/training/loop/training.ts';

const DEADLINE_MS = 800;
const root = mkdtempSync(join(tmpdir(), 'esopt-quorum-'));
const fs = new FsObjectStore(root);
/** A store that lists every key twice (as an eventually consistent listing may). */
const store: ObjectStore = {
  put: (key, body, o) => fs.put(key, body, o),
  get: (key) => fs.get(key),
  putFile: (key, path, o) => fs.putFile(key, path, o),
  getToFile: (key, path, o) => fs.getToFile(key, path, o),
  delete: (key) => fs.delete(key),
  list: async (prefix) => (await fs.list(prefix)).flatMap((k) => [k, k]),
  listObjects: (prefix) => fs.listObjects(prefix),
  listChildren: (prefix) => fs.listChildren(prefix),
};
const run = 'quorum';
const config = RunConfig.parse({
  environment: { name: 'sudoku', options: { size: 4, blanks: 4 } },
  tasks: { seed: 3, trainPerIteration: 2, evalCount: 1 },
  model: { preset: 'tiny', seed: 2 },
  es: { population: 4, sigma: 0.05, alpha: 0.05 },
  iterations: 2,
  evalInterval: 10,
  checkpointInterval: 10,
  policy: 'scripted:random',
  workers: 1,
  quorum: 0.5,
  deadlineMs: DEADLINE_MS,
  seed: 5,
});
const rewardOf = (iteration: number, member: number, task: number) => 0.1 * member + 0.05 * task + 0.01 * iteration;

let engine: Engine;
let sudoku: EnvironmentDefinition;
let options: TrainingOptions;
let tasksOf: string[][];

function record(iteration: number, member: number | 'base', task: string, reward: number): RewardRecord {
  return {
    run,
    iteration,
    member,
    task,
    reward,
    steps: 3,
    tokens: { prompt: 0, completion: 0 },
    durations: { episodeMs: 1, inferenceMs: 0 },
    cost: { usd: 0, lambdaGbSeconds: 0, gpuSeconds: 0 },
    error: null,
    transcriptKey: null,
    writtenAt: new Date().toISOString(),
  };
}
const write = (r: RewardRecord) => fs.put(keys.reward(r.run, r.iteration, r.member, r.task), JSON.stringify(r), { ifAbsent: true });
const json = async <T>(key: string, schema: { parse: (v: unknown) => T }): Promise<T> => schema.parse(JSON.parse(new TextDecoder().decode((await fs.get(key))!)));

/**
 * When each (iteration, member, task index) writes its record, in ms after dispatch, or 'straggler': still
 * running at the close, it writes its record as it is stopped (after the close, before the update).
 *   iteration 0: 4 of 8 in at once (one of them already in the store), 1 more well before the deadline.
 *   iteration 1: 3 of 8 in at once, the 4th (the quorum) only past the deadline.
 */
function schedule(iteration: number, member: number, task: number): number | 'straggler' {
  if (iteration === 0) return member < 2 ? 0 : member === 2 && task === 0 ? 200 : 'straggler';
  if (member === 0 || (member === 1 && task === 0)) return 0;
  return member === 1 ? DEADLINE_MS + 150 : 'straggler';
}

/** Every request is delivered twice (at-least-once): the second write is refused, create-only. */
const scripted: Fanout = {
  async dispatch(requests, { signal, recordsIn }) {
    return Promise.all(
      requests.map(async (request: EpisodeRequest): Promise<DispatchOutcome> => {
        const { iteration, member } = request;
        if (member === 'base') return (await write(record(iteration, 'base', request.task.id, 0)), { request, ok: true });
        const t = tasksOf[iteration].indexOf(request.task.id);
        const at = schedule(iteration, member, t);
        if (at === 'straggler') {
          await new Promise<void>((resolve) => {
            if (signal?.aborted || recordsIn?.aborted) return resolve();
            signal?.addEventListener('abort', () => resolve(), { once: true });
            recordsIn?.addEventListener('abort', () => resolve(), { once: true });
          });
        } else await sleep(at);
        await write(record(iteration, member, request.task.id, rewardOf(iteration, member, t)));
        await write(record(iteration, member, request.task.id, 99));
        return at === 'straggler' ? { request, ok: false, error: 'cancelled: the worker was killed', timedOut: true } : { request, ok: true };
      }),
    );
  },
  close: async () => {},
};

beforeAll(async () => {
  sudoku = await loadEnvironment('sudoku');
  engine = await createEngine({ model: await resolveModelSpec(config.model, store), mode: 'full' });
  const envOptions = sudoku.optionsSchema.parse(config.environment.options);
  tasksOf = [0, 1].map((k) => sudoku.sampleTasks('train', 2, iterationTaskSeed(config.tasks.seed, k), envOptions).map((t) => t.id));
  options = { run, config, store, fanout: scripted, weights: engine, population: engine, policy: { baseUrl: 'scripted:random' }, environment: sudoku, pollMs: 20 };
  // Already in the store before the run starts: never dispatched, counted once.
  await write(record(0, 0, tasksOf[0][0], rewardOf(0, 0, 0)));
});
afterAll(async () => {
  await engine?.close();
  rmSync(root, { recursive: true, force: true });
});

const pairs = (u: UpdateRecord) => u.counted.map((c) => `${c.member}/${tasksOf[u.iteration].indexOf(c.task)}`).sort();

describe('collection with quorum 0.5 and a deadline', () => {
  let updates: UpdateRecord[];

  it('waits for the deadline once the quorum is in, closes at the quorum past it, never counts a record after the close', async () => {
    // Stop right after iteration 1's update record: its log entry is still to be written.
    const stop = new Error('stopped after the update record of iteration 1');
    await expect(train({ ...options, faults: (p, k) => { if (p === 'after-update-record' && k === 1) throw stop; } })).rejects.toBe(stop);
    updates = [await json(keys.update(run, 0), UpdateRecord), await json(keys.update(run, 1), UpdateRecord)];
    // Iteration 0: the quorum was in at once, but the record at 200 ms (before the deadline) counts too.
    expect(pairs(updates[0])).toEqual(['0/0', '0/1', '1/0', '1/1', '2/0']);
    // Iteration 1: the 4th record came past the deadline and closed it; the stragglers did not count.
    expect(pairs(updates[1])).toEqual(['0/0', '0/1', '1/0', '1/1']);
    for (const u of updates) {
      // Each counted member's reward is its own records' mean, the second deliveries (99) refused.
      for (const { member, reward } of u.memberRewards) {
        const own = u.counted.filter((c) => c.member === member).map((c) => rewardOf(u.iteration, member, tasksOf[u.iteration].indexOf(c.task)));
        expect(reward).toBeCloseTo(own.reduce((a, b) => a + b, 0) / own.length, 12);
      }
      expect(u.thetaHashAfter).not.toBe(u.thetaHashBefore);
    }
    // The doubled listing was seen and ignored.
    expect(updates[0].ignored.duplicates).toBeGreaterThan(0);
    const row0 = await json(keys.metricsRow(run, 0), MetricsRow);
    expect(row0).toMatchObject({ expected: 8, counted: 5, missing: 3, timedOut: 3 });
    // The stragglers' records landed after the close: kept in the store, with their first delivery's value.
    for (const [k, m, t] of [[0, 2, 1], [0, 3, 0], [0, 3, 1], [1, 2, 0], [1, 3, 1]] as const) {
      expect((await json(keys.reward(run, k, m, tasksOf[k][t]), RewardRecord)).reward).toBe(rewardOf(k, m, t));
    }
  });

  it('resuming replays the recorded updates and still does not count the late records', async () => {
    // A fresh process: θ_0 from the model, then the log and the unlogged update record.
    const fresh = await createEngine({ model: await resolveModelSpec(config.model, store), mode: 'full' });
    try {
      const result = await train({ ...options, weights: fresh, population: fresh });
      expect(result.resumedAt).toBe(2);
      expect(result.thetaHash).toBe(updates[1].thetaHashAfter);
      expect(hashTheta(fresh.segments())).toBe(hashTheta(engine.segments()));
    } finally {
      await fresh.close();
    }
    expect([await json(keys.update(run, 0), UpdateRecord), await json(keys.update(run, 1), UpdateRecord)]).toEqual(updates);
    // The metrics hole left by the stop is filled from the update record.
    expect(await json(keys.metricsRow(run, 1), MetricsRow)).toMatchObject({ iteration: 1, counted: 4, missing: 4 });
  });
});
