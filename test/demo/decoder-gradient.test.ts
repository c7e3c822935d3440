import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../trainer/model/config.ts';
import { referenceForward } from '../../trainer/model/reference-forward.ts';
import { initDecoderWeights } from '../../trainer/model/weights.ts';
import { DecoderGradient, type LossSequence } from '../../trainer/pretrain/decoder-gradient.ts';

// Small enough for finite differences over every tensor, with every architectural piece present.
const config: ModelConfig = {
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

/** Seeded weights, scaled up from the init so attention and norms are far from their trivial regime. */
function weights() {
  const w = initDecoderWeights(config, 3);
  for (const t of w) {
    if (t.name.endsWith('layernorm.weight') || t.name === 'model.norm.weight') t.data.forEach((_, i) => (t.data[i] = 1 + 0.3 * Math.sin(i + t.name.length)));
    else for (let i = 0; i < t.data.length; i++) t.data[i] *= 25;
  }
  return w;
}

const seq: LossSequence = { ids: [1, 5, 2, 9, 12, 0, 7, 7, 3], targets: [0, 2, 4, 5, 7], weights: [0.25, 1, 1, 2, 1] };

// Targets only at the end, one weight negative (GRPO's shape): the last layer runs from the first target on.
const suffix: LossSequence = { ids: [3, 1, 4, 1, 5, 9, 2, 6, 5], targets: [5, 6, 7], weights: [1, -0.5, 2] };

function referenceLoss(s: LossSequence): number {
  const logits = referenceForward(config, weights(), s.ids);
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
function checkGradient(s: LossSequence, picks: number): void {
  const w = weights();
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
  expect(checked).toBeGreaterThan(picks * 15);
  // The check would pass vacuously if everything were zero.
  expect(grads.filter((g) => g.some((v) => Math.abs(v) > 1e-3)).length).toBe(w.length);
}

describe('decoder gradient', () => {
  it('the loss matches cross-entropy on the reference forward pass logits', () => {
    expect(new DecoderGradient(config, weights()).loss(seq)).toBeCloseTo(referenceLoss(seq), 9);
    expect(new DecoderGradient(config, weights()).loss(suffix)).toBeCloseTo(referenceLoss(suffix), 8);
  });

  it('every tensor gradient matches central finite differences', () => {
    checkGradient(seq, 6);
  });

  it('matches finite differences when only the last positions are scored', () => {
    checkGradient(suffix, 3);
  });

  it('rejects a target outside the sequence', () => {
    const model = new DecoderGradient(config, weights());
    expect(() => model.loss({ ids: [1, 2, 3], targets: [2] })).toThrow(/outside 0\.\.1/);
  });
});
