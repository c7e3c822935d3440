import { describe, expect, it } from 'vitest';
import { stepTransfers, transferShape } from '../../trainer/bench/transfer.ts';
import { buildPreset } from '../../trainer/model/open-model.ts';
import { parameterCount } from '../../trainer/model/weights.ts';

describe('bytes the CUDA provider moves per decode step', () => {
  it('at Qwen3-0.6B\'s shape, as derived by hand from its config', () => {
    const t = stepTransfers(transferShape('qwen3-0.6b-shape'), 32, 1024, 1);
    // θ: 151,936 × 1,024 tied embedding + 28 layers × 15,730,944 + the final norm's 1,024, fp32
    expect(t.theta_as_inputs_bytes).toBe((151_936 * 1024 + 28 * 15_730_944 + 1024) * 4);
    // keys and values: 2 × 28 layers × 8 KV heads × 128 × 4 B a token and row
    expect(t.kv_bytes_per_token_row).toBe(229_376);
    expect(t.kv_cache_each_way_bytes).toBe(32 * 1024 * 229_376);
    expect(t.logits_bytes).toBe(32 * 151_936 * 4);
    // per row and rank: per layer A factors m·k (q/k/v 1,024·3, gate/up 1,024·2, o 2,048, down 3,072) and
    // block-diagonal B factors k·Σn (3·4,096, 2·6,144, 1,024, 1,024), 36,864 floats; the tied head 1,024 + 151,936
    expect(t.lowrank_factor_bytes).toBe(32 * (28 * 36_864 + 1024 + 151_936) * 4);
  });

  it('counts θ as the model holds it, and scales with batch, context and rank', () => {
    const model = buildPreset('tiny', 1);
    const one = stepTransfers(model, 1, 1, 1);
    expect(one.theta_as_inputs_bytes).toBe(parameterCount(model.weights) * 4);
    const more = stepTransfers(model, 3, 10, 2);
    expect(more.kv_cache_each_way_bytes).toBe(30 * one.kv_cache_each_way_bytes);
    expect(more.logits_bytes).toBe(3 * one.logits_bytes);
    expect(more.lowrank_factor_bytes).toBe(6 * one.lowrank_factor_bytes);
    expect(stepTransfers(transferShape('tiny'), 1, 1, 1)).toEqual(one);
  });
});
