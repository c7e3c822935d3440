/**
 * Per-row factor inputs for the low-rank graph. Member i's factors for matrix j are read from its seeded
 * stream at the matrix's offset (cumulative (m+n)·r over the perturbed matrices in canonical order), with
 * A as given and Bᵀ pre-scaled by sign·σ/√r; a base row gets zeros. Each group's inputs are laid out as
 * lowrank-graph.ts describes (A blocks side by side, Bᵀ blocks on the diagonal). Factors are made once per
 * population and member, then copied into each batch's inputs. A matrix the targets leave out keeps zero
 * factors, never drawn; offsets run over every matrix, so the targeted ones read what they read under `all`.
 */
import * as ort from 'onnxruntime-node';
import { lowRankFactors, lowRankStreamLength } from '../../../shared/lowrank.ts';
import type { Member } from '../../../shared/schemas/index.ts';
import type { Population } from '../engine.ts';
import type { LowRankGroup, LowRankTarget } from './lowrank-graph.ts';

export function lowRankOffsets(targets: readonly LowRankTarget[], rank: number): number[] {
  let offset = 0;
  return targets.map((t) => {
    const o = offset;
    offset += lowRankStreamLength(t.m, t.n, rank);
    return o;
  });
}

export function groupWidth(g: LowRankGroup, targets: readonly LowRankTarget[]): number {
  return g.targets.reduce((s, t) => s + targets[t].n, 0);
}

/** One member's group inputs: a [m, k·r] and b [k·r, Σn], row-major. */
export interface GroupFactors {
  a: Float32Array;
  b: Float32Array;
}

export class FactorCache {
  private readonly cache = new Map<number, GroupFactors[]>();
  private readonly offsets: number[];

  constructor(
    private readonly targets: readonly LowRankTarget[],
    private readonly groups: readonly LowRankGroup[],
    private readonly population: Population,
    /** The weights (indices into the model's tensors) members perturb; null: every target. */
    private readonly selected: ReadonlySet<number> | null = null,
  ) {
    this.offsets = lowRankOffsets(targets, population.rank);
  }

  private factors(member: Member): GroupFactors[] {
    const cached = this.cache.get(member.index);
    if (cached) return cached;
    const { runSeed, iteration, sigma, rank: r } = this.population;
    const scale = (member.sign * sigma) / Math.sqrt(r);
    const key = { runSeed, iteration, member: member.noiseIndex };
    const made = this.groups.map((g) => {
      const k = g.targets.length;
      const width = groupWidth(g, this.targets);
      const a = new Float32Array(g.m * k * r);
      const b = new Float32Array(k * r * width);
      let col = 0;
      g.targets.forEach((ti, block) => {
        const t = this.targets[ti];
        if (this.selected && !this.selected.has(t.weight)) {
          col += t.n;
          return;
        }
        const { A, B } = lowRankFactors(key, t.m, t.n, r, this.offsets[ti]);
        for (let i = 0; i < t.m; i++) for (let q = 0; q < r; q++) a[i * k * r + block * r + q] = A[i * r + q];
        for (let q = 0; q < r; q++) for (let j = 0; j < t.n; j++) b[(block * r + q) * width + col + j] = B[j * r + q] * scale;
        col += t.n;
      });
      return { a, b };
    });
    this.cache.set(member.index, made);
    return made;
  }

  /** Factor inputs for a batch whose row b belongs to rowMembers[b] (null = base). */
  feeds(rowMembers: ReadonlyArray<Member | null>): Record<string, ort.Tensor> {
    const perRow = rowMembers.map((m) => (m ? this.factors(m) : null));
    return groupFeeds(this.targets, this.groups, rowMembers.length, this.population.rank, (gi, b) => perRow[b]?.[gi] ?? null);
  }
}

/** Zero factors for batches with no population (every row the base model). */
export function zeroFactorFeeds(targets: readonly LowRankTarget[], groups: readonly LowRankGroup[], batch: number): Record<string, ort.Tensor> {
  return groupFeeds(targets, groups, batch, 1, () => null);
}

/** A batch's factor inputs, row b of group g from `row(g, b)` (null: zeros). */
export function groupFeeds(
  targets: readonly LowRankTarget[],
  groups: readonly LowRankGroup[],
  batch: number,
  r: number,
  row: (group: number, b: number) => GroupFactors | null,
): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  groups.forEach((g, gi) => {
    const kr = g.targets.length * r;
    const width = groupWidth(g, targets);
    const a = new Float32Array(batch * g.m * kr);
    const b = new Float32Array(batch * kr * width);
    for (let k = 0; k < batch; k++) {
      const f = row(gi, k);
      if (!f) continue;
      a.set(f.a, k * g.m * kr);
      b.set(f.b, k * kr * width);
    }
    feeds[g.a] = new ort.Tensor('float32', a, [batch, g.m, kr]);
    feeds[g.b] = new ort.Tensor('float32', b, [batch, kr, width]);
  });
  return feeds;
}
