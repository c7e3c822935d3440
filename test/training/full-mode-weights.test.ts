import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { RunConfig } from '../../shared/schemas/index.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { silentProgress } from '../../trainer/training/loop/progress.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-full-weights-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('a run picks full mode\'s weights (fullModeWeights)', () => {
  it('defaults to inputs and refuses an unknown value with its path', () => {
    const base = { environment: { name: 'sudoku' }, model: { preset: 'tiny' }, es: { population: 4, sigma: 0.1, alpha: 0.1 }, iterations: 1 };
    expect(RunConfig.parse(base).fullModeWeights).toBe('inputs');
    const bad = RunConfig.safeParse({ ...base, fullModeWeights: 'cached' });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0].path).toEqual(['fullModeWeights']);
  });

  it('rebuild-session trains exactly as inputs: the same rewards, updates and θ', async () => {
    // The demo's partly trained agent plays, so the members' rewards depend on their perturbed θ.
    const config = (fullModeWeights: 'inputs' | 'rebuild-session') =>
      RunConfig.parse({
        environment: { name: 'sudoku', options: { size: 4, blanks: 6, invalidMove: 'waste', observation: 'next-cell', constrainActions: true, shapedReward: true } },
        tasks: { seed: 1, trainPerIteration: 2, evalCount: 2 },
        model: { dir: fileURLToPath(new URL('../../models/sudoku-4x4-demo', import.meta.url)) },
        fullModeWeights,
        es: { population: 4, sigma: 0.05, alpha: 0.05 },
        generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 12 },
        iterations: 2,
        evalInterval: 2,
        checkpointInterval: 2,
        workers: 2,
        seed: 3,
      });
    const runs = [];
    for (const weights of ['inputs', 'rebuild-session'] as const) {
      const { report } = await runEmbedded({ config: config(weights), run: weights, storeRoot: join(root, weights), progress: silentProgress });
      runs.push(report);
    }
    const [inputs, rebuild] = runs;
    expect(rebuild.thetaHash).toBe(inputs.thetaHash);
    expect(rebuild.perIteration.map((r) => [r.meanReward, r.counted])).toEqual(inputs.perIteration.map((r) => [r.meanReward, r.counted]));
    expect(rebuild.evaluations.map((e) => e.meanReward)).toEqual(inputs.evaluations.map((e) => e.meanReward));
    expect(inputs.perIteration.every((r) => r.counted === 8)).toBe(true);
    // And θ moved: the members' rewards differed, so the updates were not zero.
    const first = JSON.parse(readFileSync(join(root, 'inputs', 'runs', 'inputs', 'iterations', '00000000', 'manifest.json'), 'utf8')) as { thetaHash: string };
    expect(inputs.thetaHash).not.toBe(first.thetaHash);
  }, 120_000);
});
