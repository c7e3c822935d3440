/**
 * LoRA-ES's per-row inputs to the low-rank graph (lowrank-graph.ts rewrites x·W into x·W + (x·F₁)·F₂):
 * for a row whose adapters are (A, B), F₁ = Aᵀ (in × r) and F₂ = scale·Bᵀ (r × out), so the row computes
 * x·(W + scale·(B·A)ᵀ), the merged weight, without forming it. Matrices sharing an input x share one group,
 * laid out as the graph reads it (Aᵀ blocks side by side, scale·Bᵀ blocks on the diagonal). The graph's
 * targets are the layout's slots in the same order: target i is slot i.
 */
import type { LoraLayout } from '../../../shared/lora.ts';
import { loraFactors } from '../../../shared/lora.ts';
import { groupWidth, type GroupFactors } from './lowrank-factors.ts';
import type { LowRankGroup, LowRankTarget } from './lowrank-graph.ts';

/** Checks that the rewritten graph's targets are the layout's slots, one for one. */
export function checkLoraTargets(targets: readonly LowRankTarget[], layout: LoraLayout): void {
  const same = targets.length === layout.slots.length && targets.every((t, i) => t.name === layout.slots[i].name && t.m === layout.slots[i].in && t.n === layout.slots[i].out && !t.transposed);
  if (!same) throw new Error(`lora: the rewritten graph's matrices (${targets.map((t) => t.name).join(', ')}) are not the adapters' (${layout.slots.map((s) => s.name).join(', ')})`);
}

/** One row's group inputs for the adapters in `theta` (a vector of the layout). */
export function loraGroupFactors(theta: Float32Array, layout: LoraLayout, targets: readonly LowRankTarget[], groups: readonly LowRankGroup[]): GroupFactors[] {
  const r = layout.rank;
  return groups.map((g) => {
    const k = g.targets.length;
    const width = groupWidth(g, targets);
    const a = new Float32Array(g.m * k * r);
    const b = new Float32Array(k * r * width);
    let col = 0;
    g.targets.forEach((ti, block) => {
      const slot = layout.slots[ti];
      const { A, B } = loraFactors(theta, layout, slot);
      for (let i = 0; i < slot.in; i++) for (let q = 0; q < r; q++) a[i * k * r + block * r + q] = A[q * slot.in + i];
      for (let q = 0; q < r; q++) for (let j = 0; j < slot.out; j++) b[(block * r + q) * width + col + j] = layout.scale * B[j * r + q];
      col += slot.out;
    });
    return { a, b };
  });
}
