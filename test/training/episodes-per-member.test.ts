/**
 * Several episodes per member: every member plays each of the iteration's tasks.trainPerIteration tasks
 * (one record per (member, task)), and the update weighs each member by the mean of its episodes. With
 * shaping 'none' the logged coefficients show it directly: coef_j = α/G·(mean_{+j} − mean_{−j}).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import type { Fanout } from '../../shared/ports/fanout.ts';
import { RunConfig, UpdateRecord } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { resolveModelSpec } from '../../trainer/training/model-store/resolve-model.ts';
import { readLog } from '../../trainer/training/loop/checkpoints.ts';
import { iterationTaskSeed } from '../../trainer/training/loop/task-seed.ts';
import { train } from '../../trainer/training/loop/training.ts';
import { coefficientsOf } from '../../trainer/training/loop/weight-update.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-epm-'));
const store = new FsObjectStore(root);
afterAll(() => rmSync(root, { recursive: true, force: true }));

const ALPHA = 0.2;
const config = RunConfig.parse({
  environment: { name: 'sudoku', options: { size: 4, blanks: 4 } },
  tasks: { seed: 1, trainPerIteration: 2, evalCount: 1 },
  model: { preset: 'tiny', seed: 3 },
  es: { population: 4, sigma: 0.05, alpha: ALPHA, shaping: 'none' },
  iterations: 1,
  policy: 'scripted:random',
  workers: 1,
  seed: 7,
});
/** Member m's reward on the iteration's t-th task: the second episode differs, so a mean ≠ either episode. */
const rewardOf = (member: number, t: number) => (t === 0 ? 0.1 * member : 1 - 0.3 * member);

it('with 2 episodes per member, each member counts with the mean of its two rewards', async () => {
  let tasks: string[] = [];
  const fanout: Fanout = {
    async dispatch(requests) {
      return Promise.all(
        requests.map(async (request) => {
          const { run, iteration, member } = request;
          const reward = member === 'base' ? 0 : rewardOf(member, tasks.indexOf(request.task.id));
          const record = { run, iteration, member, task: request.task.id, reward, steps: 1, tokens: { prompt: 0, completion: 0 }, durations: { episodeMs: 1, inferenceMs: 0 }, cost: { usd: 0, lambdaGbSeconds: 0, gpuSeconds: 0 }, error: null, transcriptKey: null, writtenAt: new Date().toISOString() };
          await store.put(keys.reward(run, iteration, member, request.task.id), JSON.stringify(record), { ifAbsent: true });
          return { request, ok: true };
        }),
      );
    },
    close: async () => {},
  };
  const engine = await createEngine({ model: await resolveModelSpec(config.model, store), mode: 'full' });
  try {
    const sudoku = await loadEnvironment('sudoku');
    tasks = sudoku.sampleTasks('train', 2, iterationTaskSeed(config.tasks.seed, 0), sudoku.optionsSchema.parse(config.environment.options)).map((t) => t.id);
    const options = { run: 'epm', config, store, fanout, weights: engine, population: engine, policy: { baseUrl: 'scripted:random' }, environment: sudoku, pollMs: 20 };
    await train(options);
  } finally {
    await engine.close();
  }
  const u = UpdateRecord.parse(JSON.parse(new TextDecoder().decode((await store.get(keys.update('epm', 0)))!)));
  expect(u.counted).toHaveLength(8);
  const mean = (m: number) => (rewardOf(m, 0) + rewardOf(m, 1)) / 2;
  expect(u.memberRewards).toEqual([0, 1, 2, 3].map((member) => ({ member, reward: mean(member) })));
  const [entry] = await readLog(store, 'epm');
  // Antithetic: members 2j and 2j+1 share noise j with signs + and −; G = 4.
  const expected = [0, 1].map((j) => ({ noiseIndex: j, coef: (ALPHA / 4) * (mean(2 * j) - mean(2 * j + 1)) }));
  const got = coefficientsOf(entry);
  expect(got.map((c) => c.noiseIndex)).toEqual([0, 1]);
  for (const [i, c] of got.entries()) expect(c.coef).toBeCloseTo(expected[i].coef, 12);
  // Not the first episode's reward, not the sum.
  expect(Math.abs(got[0].coef - (ALPHA / 4) * (rewardOf(0, 0) - rewardOf(1, 0)))).toBeGreaterThan(1e-3);
  expect(Math.abs(got[0].coef - (ALPHA / 4) * 2 * (mean(0) - mean(1)))).toBeGreaterThan(1e-3);
});
