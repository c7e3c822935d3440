/**
 * GRPO's policy-gradient step on the decoder: the surrogate loss −Σ_i A_i · (1/T_i) Σ_t log π_θ(a_t | s_t)
 * over the batch's trajectories i (T_i sampled completion tokens each, every token carrying its
 * trajectory's advantage), averaged over trajectories, differentiated with the project's decoder gradient
 * (trainer/pretrain/decoder-gradient.ts: a weighted cross-entropy is exactly −w · log p), clipped to a
 * global norm and applied with Adam. log π is the model's full softmax, not the constrained decoder's
 * renormalised one: the constraint masks illegal tokens at sampling time, as the served model does.
 * Gradients are accumulated in the optimiser's state precision (Adam's dtype).
 */
import type { DecoderGradient, LossSequence } from '../pretrain/decoder-gradient.ts';
import type { Adam } from './adam.ts';
import type { SampledTurn } from './sampled-turns-policy.ts';

export interface Trajectory {
  turns: readonly SampledTurn[];
  advantage: number;
}

/** One sequence per turn: prompt + sampled completion, the completion's tokens weighted A / T. */
export function policyGradientSequences(t: Trajectory): LossSequence[] {
  const tokens = t.turns.reduce((a, turn) => a + turn.completionIds.length, 0);
  if (tokens === 0 || t.advantage === 0) return [];
  const w = t.advantage / tokens;
  return t.turns
    .filter((turn) => turn.completionIds.length > 0)
    .map((turn) => {
      const ids = [...turn.promptIds, ...turn.completionIds];
      const targets = turn.completionIds.map((_, j) => turn.promptIds.length - 1 + j);
      return { ids, targets, weights: targets.map(() => w) };
    });
}

/**
 * The batch's sequences with identical (ids, targets) merged by summing their weights: the loss is linear in
 * each target's weight, so the merged batch has exactly the same loss and gradient. Rollouts of a group
 * that took the same early actions share those turns' sequences.
 */
export function mergeSequences(seqs: readonly LossSequence[]): LossSequence[] {
  const merged = new Map<string, { ids: readonly number[]; targets: readonly number[]; weights: number[] }>();
  for (const s of seqs) {
    const key = `${s.ids.join(',')}|${s.targets.join(',')}`;
    const weights = s.weights ?? s.targets.map(() => 1);
    const m = merged.get(key);
    if (m) weights.forEach((w, r) => (m.weights[r] += w));
    else merged.set(key, { ids: s.ids, targets: s.targets, weights: [...weights] });
  }
  return [...merged.values()].filter((m) => m.weights.some((w) => w !== 0));
}

export interface PolicyGradientStats {
  /** Surrogate loss before the step. */
  loss: number;
  gradNorm: number;
  /** Trajectories with a non-zero advantage. */
  informative: number;
  /** Turn sequences before and after merging identical ones (the forward/backward passes run). */
  sequences: number;
  merged: number;
}

export function policyGradientStep(model: DecoderGradient, adam: Adam, trajectories: readonly Trajectory[], clipNorm: number): PolicyGradientStats {
  const grads = model.zeroGradients(adam.dtype);
  let loss = 0;
  let informative = 0;
  const all: LossSequence[] = [];
  for (const t of trajectories) {
    const seqs = policyGradientSequences(t);
    if (seqs.length) informative++;
    all.push(...seqs);
  }
  const merged = mergeSequences(all);
  for (const s of merged) loss += model.accumulate(s, grads).loss;
  const n = Math.max(1, trajectories.length);
  let norm = 0;
  for (const g of grads) for (let i = 0; i < g.length; i++) norm += (g[i] /= n) ** 2;
  norm = Math.sqrt(norm);
  if (clipNorm > 0 && norm > clipNorm) for (const g of grads) for (let i = 0; i < g.length; i++) g[i] *= clipNorm / norm;
  if (informative > 0) adam.step(grads);
  return { loss: loss / n, gradNorm: norm, informative, sequences: all.length, merged: merged.length };
}
