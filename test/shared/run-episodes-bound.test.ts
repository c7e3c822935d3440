/**
 * RunConfig bounds a run's episodes, training and evaluation together, at MAX_RUN_EPISODES: exactly at the
 * limit is accepted, one evaluation episode more is refused at `iterations`, naming the product and the
 * limit; a resume that would pass it is refused the same way.
 */
import { describe, expect, it } from 'vitest';
import { MAX_RUN_EPISODES, RunConfig, runEpisodes } from '../../shared/schemas/index.ts';
import { extendRunConfig } from '../../shared/run-extension.ts';
import { tinyRunConfig } from '../api/helpers.ts';

// 10 members × 1 task × 999,990 iterations = 9,999,900 training episodes; evaluations before iteration 0
// and after the last (evalInterval = iterations), evalCount tasks each.
const atLimit = (evalCount: number) =>
  tinyRunConfig({ es: { population: 10, sigma: 0.02, alpha: 0.01 }, tasks: { seed: 1, trainPerIteration: 1, evalCount }, iterations: 999_990, evalInterval: 999_990 });

describe('the episodes of a run', () => {
  it('counts training and evaluation episodes', () => {
    const c = RunConfig.parse(tinyRunConfig({ iterations: 5, evalInterval: 2 }));
    // evaluations before iterations 0, 2, 4 and after the last: 4 × evalCount 2
    expect(runEpisodes(c)).toEqual({ train: 2 * 1 * 5, evaluation: 8 });
  });

  it('accepts a run of exactly MAX_RUN_EPISODES and refuses one more, at iterations, naming the product and the limit', () => {
    expect(MAX_RUN_EPISODES).toBe(10_000_000);
    const ok = RunConfig.safeParse(atLimit(50));
    expect(ok.success).toBe(true);
    expect(runEpisodes(ok.data!)).toEqual({ train: 9_999_900, evaluation: 100 });
    const over = RunConfig.safeParse(atLimit(51));
    expect(over.success).toBe(false);
    expect(over.error!.issues).toHaveLength(1);
    expect(over.error!.issues[0].path).toEqual(['iterations']);
    expect(over.error!.issues[0].message).toBe(
      'the run would play 10,000,002 episodes (population 10 × trainPerIteration 1 × iterations 999990 = 9,999,900, plus 102 evaluation episodes), above the limit of 10,000,000 a run (MAX_RUN_EPISODES): fewer iterations, a smaller population or fewer tasks per iteration',
    );
  });

  it('refuses the largest run each field allows on its own (10¹⁵ episodes)', () => {
    const r = RunConfig.safeParse(tinyRunConfig({ es: { population: 100_000, sigma: 0.02, alpha: 0.01 }, tasks: { seed: 1, trainPerIteration: 10_000, evalCount: 2 }, iterations: 1_000_000 }));
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => i.path.join('.'))).toEqual(['iterations']);
    expect(r.error!.issues[0].message).toContain('population 100000 × trainPerIteration 10000 × iterations 1000000 = 1,000,000,000,000,000');
  });

  it('refuses a resume that would take the run past the limit', () => {
    const config = RunConfig.parse(atLimit(1));
    const extended = extendRunConfig(config, { iterations: 1_000_000 }, 10);
    expect(extended.ok).toBe(false);
    expect(!extended.ok && extended.issues.map((i) => i.path)).toEqual(['iterations']);
  });
});
