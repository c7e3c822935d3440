import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { referenceForward } from '../../trainer/engine/model/reference-forward.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { DecoderGradient, type LossSequence } from '../../trainer/studies/pretrain/decoder-gradient.ts';

// Small enough for finite differences over every tensor, with every architectural piece present.
const llama: ModelConfig = {
  model_type: 'llama',
  vocab_size: 13,
  hidden_size: 8,
  intermediate_size: 12,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 2,
  max_position_embeddings: 32,
  rope_theta: 10000,
  rms_norm_eps: 1e-5,
};

// Each family's pieces at the same tiny size: grouped KV heads, head_dim apart from hidden/heads, biases,
// per-head q/k norms, a tied head, Gemma's scaled embeddings, (1 + w) norms and GELU, Llama 3 rope scaling.
const families: { name: string; config: ModelConfig }[] = [
  { name: 'llama (multi-head, untied)', config: llama },
  {
    name: 'qwen3 (q/k norms, head_dim 4 × 4 heads ≠ hidden 8, GQA 4/2, tied)',
    config: { ...llama, model_type: 'qwen3', num_attention_heads: 4, num_key_value_heads: 2, head_dim: 4, rope_theta: 1e6, rms_norm_eps: 1e-6, tie_word_embeddings: true },
  },
  { name: 'qwen2 (q/k/v biases, GQA 2/1, untied)', config: { ...llama, model_type: 'qwen2', num_key_value_heads: 1, rope_theta: 1e6 } },
  {
    name: 'llama 3 (q/k/v/o biases, rope scaling, GQA 4/2, tied)',
    config: {
      ...llama,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      attention_bias: true,
      tie_word_embeddings: true,
      rope_theta: 500000,
      rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 },
    },
  },
  { name: 'gemma (√hidden embeddings, (1 + w) norms, GELU, MQA, head_dim 6)', config: { ...llama, model_type: 'gemma', num_key_value_heads: 1, head_dim: 6, hidden_activation: 'gelu_pytorch_tanh', rms_norm_eps: 1e-6 } },
];

const isNorm = (name: string) => name.endsWith('layernorm.weight') || name.endsWith('_norm.weight') || name === 'model.norm.weight';

/** Seeded weights, scaled up from the init so attention and norms are far from their trivial regime. */
function weights(config: ModelConfig) {
  const w = initDecoderWeights(config, 3);
  const gemma = config.model_type === 'gemma';
  for (const t of w) {
    // Gemma's norms scale by (1 + w): the same effective scales as the others'.
    if (isNorm(t.name)) t.data.forEach((_, i) => (t.data[i] = (gemma ? 0 : 1) + 0.3 * Math.sin(i + t.name.length)));
    else for (let i = 0; i < t.data.length; i++) t.data[i] *= gemma && t.name === 'model.embed_tokens.weight' ? 25 / Math.sqrt(config.hidden_size) : 25;
  }
  return w;
}

const seq: LossSequence = { ids: [1, 5, 2, 9, 12, 0, 7, 7, 3], targets: [0, 2, 4, 5, 7], weights: [0.25, 1, 1, 2, 1] };

// Targets only at the end, one weight negative (GRPO's shape): the last layer runs from the first target on.
const suffix: LossSequence = { ids: [3, 1, 4, 1, 5, 9, 2, 6, 5], targets: [5, 6, 7], weights: [1, -0.5, 2] };

function referenceLoss(config: ModelConfig, s: LossSequence): number {
  const logits = referenceForward(config, weights(config), s.ids);
  let expected = 0;
  s.targets.forEach((t, r) => {
    const row = logits[t];
    const max = Math.max(...row);
    const lse = Math.log(row.reduce((a, v) => a + Math.exp(v - max), 0)) + max;
    expected += (s.weights?.[r] ?? 1) * (lse - row[s.ids[t + 1]]);
  });
  return expected;
}

/** Compares `picks` entries of every tensor's gradient with central finite differences; returns how many. */
function checkGradient(config: ModelConfig, s: LossSequence, picks: number): void {
  const w = weights(config);
  const model = new DecoderGradient(config, w);
  const grads = model.zeroGradients();
  model.accumulate(s, grads);
  let checked = 0;
  w.forEach((t, ti) => {
    // A spread of entries per tensor, including an embedding row the sequence actually reads.
    const at = new Set<number>();
    for (let k = 0; k < picks; k++) at.add((k * 7919 + ti * 31) % t.data.length);
    if (t.name === 'model.embed_tokens.weight') at.add(5 * config.hidden_size + 3);
    for (const i of at) {
      const original = t.data[i];
      const h = 1e-3;
      t.data[i] = original + h;
      const up = t.data[i];
      const lossUp = model.loss(s);
      t.data[i] = original - h;
      const down = t.data[i];
      const lossDown = model.loss(s);
      t.data[i] = original;
      const numeric = (lossUp - lossDown) / (up - down);
      const analytic = grads[ti][i];
      expect(Math.abs(analytic - numeric), `${t.name}[${i}]: analytic ${analytic}, numeric ${numeric}`).toBeLessThan(1e-4 + 1e-3 * Math.abs(numeric));
      checked++;
    }
  });
  expect(checked).toBeGreaterThan(w.length * Math.min(picks, 4));
  // The check would pass vacuously if everything were zero.
  expect(grads.filter((g) => g.some((v) => Math.abs(v) > 1e-3)).length).toBe(w.length);
}

describe.each(families)('decoder gradient: $name', ({ config }) => {
  // The gradient rotates with the graph's float32 inverse frequencies, the reference with float64 ones:
  // at these weights that alone moves the loss by up to ≈ 2e-7 (Llama 3's scaled frequencies).
  it('the loss matches cross-entropy on the reference forward pass logits', () => {
    expect(new DecoderGradient(config, weights(config)).loss(seq)).toBeCloseTo(referenceLoss(config, seq), 6);
    expect(new DecoderGradient(config, weights(config)).loss(suffix)).toBeCloseTo(referenceLoss(config, suffix), 6);
  });

  it('every tensor gradient matches central finite differences', () => {
    checkGradient(config, seq, 6);
  });

  it('matches finite differences when only the last positions are scored', () => {
    checkGradient(config, suffix, 3);
  });
});

describe('decoder gradient', () => {
  it('keeps the 9-digit agreement with the reference forward pass on the multi-head preset', () => {
    expect(new DecoderGradient(llama, weights(llama)).loss(seq)).toBeCloseTo(referenceLoss(llama, seq), 9);
  });

  it('rejects a target outside the sequence', () => {
    const model = new DecoderGradient(llama, weights(llama));
    expect(() => model.loss({ ids: [1, 2, 3], targets: [2] })).toThrow(/outside 0\.\.1/);
  });

  it('names a tensor the architecture needs and the weights lack, at construction', () => {
    const qwen3 = families[1].config;
    const w = weights(qwen3).filter((t) => t.name !== 'model.layers.1.self_attn.k_norm.weight');
    expect(() => new DecoderGradient(qwen3, w)).toThrow(/missing tensor "model\.layers\.1\.self_attn\.k_norm\.weight"/);
  });

  it('refuses query heads that do not split evenly over the KV heads', () => {
    expect(() => new DecoderGradient({ ...llama, num_attention_heads: 3, num_key_value_heads: 2, head_dim: 4 }, [])).toThrow(/not a multiple of num_key_value_heads 2/);
  });
});
