/**
 * GRPO's policy-gradient step on the decoder: the surrogate loss
 *   (1/n) Σ_i (1/T_i) Σ_t [ −A_i · log π_θ(a_t | s_t) + β · k3_t ],   k3_t = r_t − log r_t − 1,  r_t = π_ref(a_t) / π_θ(a_t)
 * over the batch's n trajectories i (T_i sampled completion tokens each, every token carrying its
 * trajectory's advantage; k3 is DeepSeekMath's unbiased, non-negative estimate of KL(π_θ ‖ π_ref) to the
 * base model, used when β > 0), differentiated with the project's decoder gradient
 * (trainer/studies/pretrain/decoder-gradient.ts: a weighted cross-entropy is exactly −w · log p, and
 * ∂k3_t/∂log π_θ(a_t) = 1 − r_t, so the KL term is the weight β (r_t − 1) / T_i on the same tokens), clipped
 * to a global norm and applied with Adam. log π is the model's full softmax, not the constrained decoder's
 * renormalised one: the constraint masks illegal tokens at sampling time, as the served model does.
 * Gradients are accumulated in the optimiser's state precision (Adam's dtype).
 */
import type { DecoderGradient, LossSequence } from '../pretrain/decoder-gradient.ts';
import type { GradientBuffer, GradientDtype } from '../pretrain/gradient-kernels.ts';
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
  return [...mergedByKey(seqs).values()].filter((m) => m.weights.some((w) => w !== 0));
}

/** The sequence's identity for merging: its ids and its scored positions. */
function sequenceKey(s: LossSequence): string {
  return `${s.ids.join(',')}|${s.targets.join(',')}`;
}

function mergedByKey(seqs: readonly LossSequence[]): Map<string, { ids: readonly number[]; targets: readonly number[]; weights: number[] }> {
  const merged = new Map<string, { ids: readonly number[]; targets: readonly number[]; weights: number[] }>();
  for (const s of seqs) {
    const key = sequenceKey(s);
    const weights = s.weights ?? s.targets.map(() => 1);
    const m = merged.get(key);
    if (m) weights.forEach((w, r) => (m.weights[r] += w));
    else merged.set(key, { ids: s.ids, targets: s.targets, weights: [...weights] });
  }
  return merged;
}

/** The KL term's β and the frozen base model it is measured against. */
export interface KlPenalty {
  coef: number;
  reference: DecoderGradient;
}

/** The current and the reference model's log-probabilities of one turn sequence's targets. */
type LogProbsOf = (s: LossSequence) => { current: number[]; reference: number[] };

/**
 * The KL term's sequences for one trajectory: its turns' completion tokens weighted β (r_t − 1) / T, with
 * r_t from the current and the reference model's log-probabilities; also its mean k3 over those tokens.
 */
export function klSequences(t: Trajectory, kl: KlPenalty, logProbsOf: LogProbsOf): { sequences: LossSequence[]; meanK3: number } {
  const base = policyGradientSequences({ ...t, advantage: 1 });
  const tokens = base.reduce((a, s) => a + s.targets.length, 0);
  let k3 = 0;
  const sequences = base.map((s) => {
    const { current, reference } = logProbsOf(s);
    const weights = current.map((lp, r) => {
      const logRatio = reference[r] - lp;
      k3 += Math.exp(logRatio) - logRatio - 1;
      return (kl.coef * (Math.exp(logRatio) - 1)) / tokens;
    });
    return { ids: s.ids, targets: s.targets, weights };
  });
  return { sequences, meanK3: tokens ? k3 / tokens : 0 };
}

export interface PolicyGradientStats {
  /** Surrogate loss before the step (the advantage part; the KL part is `kl`). */
  loss: number;
  gradNorm: number;
  /** Trajectories with a non-zero advantage. */
  informative: number;
  /** Turn sequences before and after merging identical ones (the forward/backward passes run). */
  sequences: number;
  merged: number;
  /** Mean over trajectories of their per-token k3 estimate of KL(π_θ ‖ π_ref); null without a KL term. */
  kl: number | null;
}

/** The surrogate's gradient (aligned with the model's weights, in `dtype`), before clipping. */
export function policyGradient(
  model: DecoderGradient,
  trajectories: readonly Trajectory[],
  dtype: GradientDtype,
  kl: KlPenalty | null = null,
): { grads: GradientBuffer[]; stats: PolicyGradientStats } {
  const grads = model.zeroGradients(dtype);
  let informative = 0;
  let k3 = 0;
  const advantageSeqs: LossSequence[] = [];
  const klSeqs: LossSequence[] = [];
  // Rollouts of a group share early turns: each distinct sequence's two forward passes run once.
  const logProbs = new Map<string, { current: number[]; reference: number[] }>();
  const logProbsOf: LogProbsOf = (s) => {
    const key = sequenceKey(s);
    let lp = logProbs.get(key);
    if (!lp) logProbs.set(key, (lp = { current: model.logProbs(s), reference: kl!.reference.logProbs(s) }));
    return lp;
  };
  for (const t of trajectories) {
    const seqs = policyGradientSequences(t);
    if (seqs.length) informative++;
    advantageSeqs.push(...seqs);
    if (kl && kl.coef > 0) {
      const k = klSequences(t, kl, logProbsOf);
      klSeqs.push(...k.sequences);
      k3 += k.meanK3;
    }
  }
  const n = Math.max(1, trajectories.length);
  // The loss reported is the advantage part's, −Σ w · log p over the same passes (k3 is reported apart).
  const advantageWeights = mergedByKey(advantageSeqs);
  const merged = mergeSequences([...advantageSeqs, ...klSeqs]);
  let loss = 0;
  for (const s of merged) {
    const { logProbs } = model.accumulate(s, grads);
    advantageWeights.get(sequenceKey(s))?.weights.forEach((w, r) => (loss -= w * logProbs[r]));
  }
  for (const g of grads) for (let i = 0; i < g.length; i++) g[i] /= n;
  return { grads, stats: { loss: loss / n, gradNorm: 0, informative, sequences: advantageSeqs.length + klSeqs.length, merged: merged.length, kl: kl && kl.coef > 0 ? k3 / n : null } };
}

export function policyGradientStep(model: DecoderGradient, adam: Adam, trajectories: readonly Trajectory[], clipNorm: number, kl: KlPenalty | null = null): PolicyGradientStats {
  const { grads, stats } = policyGradient(model, trajectories, adam.dtype, kl);
  let norm = 0;
  for (const g of grads) for (let i = 0; i < g.length; i++) norm += g[i] ** 2;
  norm = Math.sqrt(norm);
  if (clipNorm > 0 && norm > clipNorm) for (const g of grads) for (let i = 0; i < g.length; i++) g[i] *= clipNorm / norm;
  if (stats.merged > 0) adam.step(grads);
  return { ...stats, gradNorm: norm };
}
