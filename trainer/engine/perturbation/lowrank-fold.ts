/**
 * Low-rank mode's update, folded into the stored weight: W += Σ coefᵢ·AᵢBᵢᵀ/√r for a weight stored as it
 * multiplies (shared `accumulateLowRank`), and its transpose, E += Σ coefᵢ·BᵢAᵢᵀ/√r, for a tied table
 * stored [n, m] (lowrank-graph.ts), formed row by row of E in float64 so E sees one rounding per element.
 */
import { accumulateLowRank, lowRankFactors, type LowRankTerm } from '../../../shared/lowrank.ts';
import type { EngineUpdate } from '../engine.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';
import { lowRankOffsets } from './lowrank-factors.ts';
import type { LowRankTarget } from './lowrank-graph.ts';

/**
 * One iteration's update in low-rank mode: each target W ← (1 − decay)·W + Σ coefⱼ·AⱼBⱼᵀ/√r, with the
 * factors the population was drawn with. The engine and a session-free replay (trainer/training/export/) both
 * apply it here, so they reach the same θ bit for bit. `selected` (weight indices; null: all) limits it to
 * the run's targets, each at its offset among all targets.
 */
export function foldLowRankUpdate(weights: readonly NamedTensor[], targets: readonly LowRankTarget[], u: EngineUpdate, selected: ReadonlySet<number> | null = null): void {
  const offsets = lowRankOffsets(targets, u.rank);
  targets.forEach((t, j) => {
    if (selected && !selected.has(t.weight)) return;
    const W = weights[t.weight].data;
    if (u.decay) for (let i = 0; i < W.length; i++) W[i] *= 1 - u.decay;
    foldLowRank(W, t, u.rank, u.coefficients.map((c) => ({ key: { runSeed: u.runSeed, iteration: u.iteration, member: c.noiseIndex }, offset: offsets[j], coef: c.coef })));
  });
}

export function foldLowRank(W: Float32Array, t: LowRankTarget, r: number, terms: readonly LowRankTerm[]): void {
  if (!t.transposed) return accumulateLowRank(W, t.m, t.n, r, terms);
  const { m, n } = t;
  if (W.length !== m * n) throw new RangeError(`${t.name} has ${W.length} elements, expected ${n}×${m}`);
  const factors = terms.map((term) => ({ f: lowRankFactors(term.key, m, n, r, term.offset), scale: term.coef / Math.sqrt(r) }));
  const rowSum = new Float64Array(m);
  for (let v = 0; v < n; v++) {
    rowSum.fill(0);
    for (const { f, scale } of factors) {
      for (let k = 0; k < r; k++) {
        const b = f.B[v * r + k] * scale;
        if (b === 0) continue;
        for (let d = 0; d < m; d++) rowSum[d] += b * f.A[d * r + k];
      }
    }
    const base = v * m;
    for (let d = 0; d < m; d++) W[base + d] += rowSum[d];
  }
}
