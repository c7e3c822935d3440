/**
 * Per-row factor inputs for the low-rank graph. Member i's factors for matrix j are read from its seeded
 * stream at the matrix's offset (cumulative (m+n)·r over the perturbed matrices in canonical order), with
 * A as given and Bᵀ pre-scaled by sign·σ/√r; a base row gets zeros. Factors are made once per population
 * and member (O(Σ(m+n)·r) floats each), then copied into each batch's [batch, m, r] / [batch, r, n] inputs.
 */
import * as ort from 'onnxruntime-node';
import { lowRankFactors, lowRankStreamLength } from '../../shared/lowrank.ts';
import type { Member } from '../../shared/schemas/index.ts';
import type { Population } from '../engine.ts';
import type { LowRankTarget } from './lowrank-graph.ts';

export function lowRankOffsets(targets: readonly LowRankTarget[], rank: number): number[] {
  let offset = 0;
  return targets.map((t) => {
    const o = offset;
    offset += lowRankStreamLength(t.m, t.n, rank);
    return o;
  });
}

interface MemberFactors {
  a: Float32Array[];
  bt: Float32Array[];
}

export class FactorCache {
  private readonly cache = new Map<number, MemberFactors>();
  private readonly offsets: number[];

  constructor(
    private readonly targets: readonly LowRankTarget[],
    private readonly population: Population,
  ) {
    this.offsets = lowRankOffsets(targets, population.rank);
  }

  private factors(member: Member): MemberFactors {
    let f = this.cache.get(member.index);
    if (f) return f;
    const { runSeed, iteration, sigma, rank: r } = this.population;
    const scale = (member.sign * sigma) / Math.sqrt(r);
    f = { a: [], bt: [] };
    this.targets.forEach((t, j) => {
      const { A, B } = lowRankFactors({ runSeed, iteration, member: member.noiseIndex }, t.m, t.n, r, this.offsets[j]);
      const bt = new Float32Array(r * t.n);
      for (let col = 0; col < t.n; col++) for (let k = 0; k < r; k++) bt[k * t.n + col] = B[col * r + k] * scale;
      f!.a.push(A);
      f!.bt.push(bt);
    });
    this.cache.set(member.index, f);
    return f;
  }

  /** Factor inputs for a batch whose row b belongs to rowMembers[b] (null = base). */
  feeds(rowMembers: ReadonlyArray<Member | null>): Record<string, ort.Tensor> {
    const B = rowMembers.length;
    const r = this.population.rank;
    const perRow = rowMembers.map((m) => (m ? this.factors(m) : null));
    const feeds: Record<string, ort.Tensor> = {};
    this.targets.forEach((t, j) => {
      const a = new Float32Array(B * t.m * r);
      const bt = new Float32Array(B * r * t.n);
      perRow.forEach((f, b) => {
        if (!f) return;
        a.set(f.a[j], b * t.m * r);
        bt.set(f.bt[j], b * r * t.n);
      });
      feeds[t.a] = new ort.Tensor('float32', a, [B, t.m, r]);
      feeds[t.b] = new ort.Tensor('float32', bt, [B, r, t.n]);
    });
    return feeds;
  }
}

/** Zero factors for base-only batches when no population is set. */
export function zeroFactorFeeds(targets: readonly LowRankTarget[], batch: number, rank: number): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  for (const t of targets) {
    feeds[t.a] = new ort.Tensor('float32', new Float32Array(batch * t.m * rank), [batch, t.m, rank]);
    feeds[t.b] = new ort.Tensor('float32', new Float32Array(batch * rank * t.n), [batch, rank, t.n]);
  }
  return feeds;
}
