import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { DecoderGradient } from '../../trainer/studies/pretrain/decoder-gradient.ts';
import { Adam } from '../../trainer/studies/grpo/adam.ts';
import type { GradientDtype } from '../../trainer/studies/pretrain/gradient-kernels.ts';
import { groupAdvantages } from '../../trainer/studies/grpo/advantages.ts';
import { mergeSequences, policyGradient, policyGradientSequences, policyGradientStep, type Trajectory } from '../../trainer/studies/grpo/policy-gradient.ts';

const config: ModelConfig = {
  model_type: 'llama',
  vocab_size: 11,
  hidden_size: 8,
  intermediate_size: 12,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 2,
  max_position_embeddings: 16,
  rope_theta: 10000,
  rms_norm_eps: 1e-5,
};

describe('group-relative advantages', () => {
  it('are (R − mean) / (std + ε) with the population standard deviation', () => {
    // mean 0.5, population std 0.5.
    const a = groupAdvantages([1, 0, 1, 0], 0);
    expect(a).toEqual([1, -1, 1, -1]);
    const b = groupAdvantages([3, 1, 2]);
    const std = Math.sqrt(2 / 3);
    b.forEach((x, i) => expect(x).toBeCloseTo(([3, 1, 2][i] - 2) / (std + 1e-6), 9));
    expect(b.reduce((s, x) => s + x, 0)).toBeCloseTo(0, 12);
  });

  it('are zero when every rollout of the group scored the same', () => {
    expect(groupAdvantages([1, 1, 1])).toEqual([0, 0, 0]);
    expect(() => groupAdvantages([])).toThrow(/at least one rollout/);
  });

  it('weight every completion token of a trajectory by A / T, and the prompt not at all', () => {
    const t: Trajectory = { advantage: 2, turns: [{ promptIds: [1, 2, 3], completionIds: [4, 5] }, { promptIds: [6], completionIds: [7, 8] }] };
    const seqs = policyGradientSequences(t);
    expect(seqs).toEqual([
      { ids: [1, 2, 3, 4, 5], targets: [2, 3], weights: [0.5, 0.5] },
      { ids: [6, 7, 8], targets: [0, 1], weights: [0.5, 0.5] },
    ]);
    expect(policyGradientSequences({ ...t, advantage: 0 })).toEqual([]);
  });
});

describe('merging identical turn sequences', () => {
  const a = { ids: [1, 2, 3, 4], targets: [2], weights: [0.5] };
  const b = { ids: [1, 2, 3, 5], targets: [2], weights: [-0.25] };

  it('sums the weights of identical sequences and keeps distinct ones apart', () => {
    const merged = mergeSequences([a, b, { ...a, weights: [0.25] }]);
    expect(merged).toEqual([{ ids: a.ids, targets: a.targets, weights: [0.75] }, b]);
    // The same ids scored at other positions is another sequence.
    expect(mergeSequences([a, { ids: a.ids, targets: [1, 2], weights: [1, 1] }])).toHaveLength(2);
    // Weights that cancel exactly contribute nothing.
    expect(mergeSequences([a, { ...a, weights: [-0.5] }])).toEqual([]);
  });

  it('gives the same gradient as the unmerged batch', () => {
    const model = new DecoderGradient(config, initDecoderWeights(config, 2));
    const batch = [a, b, { ...a, weights: [1.5] }, { ...b, weights: [0.75] }];
    const separate = model.zeroGradients();
    for (const s of batch) model.accumulate(s, separate);
    const merged = model.zeroGradients();
    for (const s of mergeSequences(batch)) model.accumulate(s, merged);
    separate.forEach((g, k) => g.forEach((v, i) => expect(merged[k][i]).toBeCloseTo(v, 12)));
    expect(separate.some((g) => g.some((v) => v !== 0))).toBe(true);
  });
});

describe('one GRPO step', () => {
  const logProb = (model: DecoderGradient, ids: number[], from: number) => -model.loss({ ids, targets: Array.from({ length: ids.length - 1 - from }, (_, j) => from + j) });

  it('raises the log-probability of a positively advantaged sampled sequence and lowers a negative one', () => {
    const model = new DecoderGradient(config, initDecoderWeights(config, 1));
    const adam = new Adam(model.weights.map((w) => w.data), 0.01);
    const good = { promptIds: [1, 2, 3], completionIds: [4, 5, 6] };
    const bad = { promptIds: [1, 2, 3], completionIds: [7, 8, 9] };
    const goodBefore = logProb(model, [...good.promptIds, ...good.completionIds], 2);
    const badBefore = logProb(model, [...bad.promptIds, ...bad.completionIds], 2);
    const [ag, ab] = groupAdvantages([1, 0]);
    const stats = policyGradientStep(model, adam, [{ turns: [good], advantage: ag }, { turns: [bad], advantage: ab }], 1);
    expect(stats.informative).toBe(2);
    expect(logProb(model, [...good.promptIds, ...good.completionIds], 2)).toBeGreaterThan(goodBefore);
    expect(logProb(model, [...bad.promptIds, ...bad.completionIds], 2)).toBeLessThan(badBefore);
  });

  it('changes nothing when no trajectory carries an advantage', () => {
    const model = new DecoderGradient(config, initDecoderWeights(config, 1));
    const before = model.weights.map((w) => w.data.slice());
    const adam = new Adam(model.weights.map((w) => w.data), 0.01);
    policyGradientStep(model, adam, [{ turns: [{ promptIds: [1], completionIds: [2] }], advantage: 0 }], 1);
    model.weights.forEach((w, k) => expect(Array.from(w.data)).toEqual(Array.from(before[k])));
  });

  it('takes the same step with float32 gradients and moments, in float32 buffers', () => {
    const step = (dtype: GradientDtype) => {
      const model = new DecoderGradient(config, initDecoderWeights(config, 1));
      const adam = new Adam(model.weights.map((w) => w.data), 0.01, dtype);
      const before = model.weights.map((w) => w.data.slice());
      const [ag, ab] = groupAdvantages([1, 0]);
      const turns = (c: number[]) => [{ promptIds: [1, 2, 3], completionIds: c }];
      policyGradientStep(model, adam, [{ turns: turns([4, 5, 6]), advantage: ag }, { turns: turns([7, 8, 9]), advantage: ab }], 1);
      return { deltas: model.weights.map((w, k) => w.data.map((v, i) => v - before[k][i])), grads: model.zeroGradients(dtype) };
    };
    const f64 = step('float64');
    const f32 = step('float32');
    expect(f32.grads.every((g) => g instanceof Float32Array)).toBe(true);
    expect(f64.grads.every((g) => g instanceof Float64Array)).toBe(true);
    let largest = 0;
    let worst = 0;
    f64.deltas.forEach((d, k) => d.forEach((v, i) => ((largest = Math.max(largest, Math.abs(v))), (worst = Math.max(worst, Math.abs(v - f32.deltas[k][i]))))));
    expect(largest).toBeGreaterThan(0.005);
    expect(worst).toBeLessThan(1e-3 * largest);
  });
});

describe('the KL term to the base model', () => {
  const drifted = () => {
    // The policy after some training: the base weights moved by a seeded offset.
    const w = initDecoderWeights(config, 1);
    const offset = initDecoderWeights(config, 9);
    w.forEach((t, k) => t.data.forEach((v, i) => (t.data[i] = v + 3 * offset[k].data[i])));
    return w;
  };
  const trajectories: Trajectory[] = [
    { advantage: 1, turns: [{ promptIds: [1, 2, 3], completionIds: [4, 5] }, { promptIds: [6, 2], completionIds: [7] }] },
    { advantage: -1, turns: [{ promptIds: [1, 2, 3], completionIds: [9, 10, 3] }] },
    { advantage: 0, turns: [{ promptIds: [8], completionIds: [2, 2] }] },
  ];

  /** The surrogate written out from log-probabilities: (1/n) Σ_i (1/T_i) Σ_t [−A_i ℓ_t + β (r_t − log r_t − 1)]. */
  function surrogate(model: DecoderGradient, reference: DecoderGradient, beta: number): number {
    let total = 0;
    for (const t of trajectories) {
      const tokens = t.turns.reduce((a, x) => a + x.completionIds.length, 0);
      for (const turn of t.turns) {
        const seq = { ids: [...turn.promptIds, ...turn.completionIds], targets: turn.completionIds.map((_, j) => turn.promptIds.length - 1 + j) };
        const lp = model.logProbs(seq);
        const ref = reference.logProbs(seq);
        lp.forEach((l, r) => (total += (-t.advantage * l + beta * (Math.exp(ref[r] - l) - (ref[r] - l) - 1)) / tokens));
      }
    }
    return total / trajectories.length;
  }

  it('its gradient, folded into token weights, matches finite differences of the written-out surrogate', () => {
    const reference = new DecoderGradient(config, initDecoderWeights(config, 1));
    const w = drifted();
    const model = new DecoderGradient(config, w);
    const beta = 0.7;
    const { grads, stats } = policyGradient(model, trajectories, 'float64', { coef: beta, reference });
    expect(stats.kl).toBeGreaterThan(0.01);
    let checked = 0;
    w.forEach((t, k) => {
      for (const i of [0, 7, Math.floor(t.data.length / 2), t.data.length - 1]) {
        const original = t.data[i];
        t.data[i] = original + 1e-3;
        const up = surrogate(model, reference, beta);
        const hi = t.data[i];
        t.data[i] = original - 1e-3;
        const down = surrogate(model, reference, beta);
        const lo = t.data[i];
        t.data[i] = original;
        const numeric = (up - down) / (hi - lo);
        expect(Math.abs(grads[k][i] - numeric), `${t.name}[${i}]`).toBeLessThan(1e-5 + 1e-3 * Math.abs(numeric));
        checked++;
      }
    });
    expect(checked).toBe(w.length * 4);
    // The KL part is not vacuous: without it the gradient differs.
    const plain = policyGradient(model, trajectories, 'float64').grads;
    expect(plain.some((g, k) => g.some((v, i) => Math.abs(v - grads[k][i]) > 1e-4))).toBe(true);
  });

  it('is zero at the base model, and a step on it alone moves the policy back towards the base', () => {
    const atBase = new DecoderGradient(config, initDecoderWeights(config, 1));
    const reference = new DecoderGradient(config, initDecoderWeights(config, 1));
    const still = trajectories.map((t) => ({ ...t, advantage: 0 }));
    const base = policyGradient(atBase, still, 'float64', { coef: 1, reference });
    expect(base.stats.kl).toBe(0);
    expect(base.grads.every((g) => g.every((v) => v === 0))).toBe(true);

    const model = new DecoderGradient(config, drifted());
    const adam = new Adam(model.weights.map((x) => x.data), 0.003);
    const first = policyGradientStep(model, adam, still, 0, { coef: 1, reference });
    for (let k = 0; k < 4; k++) policyGradientStep(model, adam, still, 0, { coef: 1, reference });
    expect(first.informative).toBe(0);
    expect(policyGradient(model, still, 'float64', { coef: 1, reference }).stats.kl).toBeLessThan(first.kl! * 0.9);
  });
});
