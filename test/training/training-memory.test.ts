import { describe, expect, it } from 'vitest';
import { run } from '../../trainer/studies/bench/memory.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { decoderTensorSpecs } from '../../trainer/engine/model/weights.ts';

const thetaMiB = decoderTensorSpecs(PRESETS.small).reduce((a, s) => a + s.dims.reduce((x, y) => x * y, 1), 0) * 4 / 2 ** 20;

describe('training memory = inference memory', () => {
  // Two child processes (bench memory's probe): one generates, one trains on the same calls (perturb,
  // generate, restore, switch to the antithetic twin, update). A θ-sized buffer anywhere on the training
  // path (a noise or update array, a second copy of θ) adds at least θ to the peak; what is allowed is
  // the sparse fix-ups and scratch (≈ 15 MiB here, against 41 MiB of θ).
  it('the training path allocates nothing near θ\'s size, full mode, small', async () => {
    const r = await run({ mode: 'full', model: 'small', population: 2, batch: 1, promptTokens: 4, newTokens: 4, iterations: 2, fullModeWeights: 'inputs', vs: 'generate', grpoState: 'float64', grpoKl: 0 }, () => {});
    if (!('train_peak_rss_mib' in r)) throw new Error('bench memory without --vs grpo returns the train ÷ generate figures');
    expect(r.train_peak_rss_mib - r.generate_peak_rss_mib).toBeLessThan(thetaMiB * 0.75);
  }, 120_000);
});
