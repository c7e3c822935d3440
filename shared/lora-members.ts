/**
 * LoRA-ES members: member i's adapters are θ + c·εᵢ with εᵢ the member's ordinary seeded stream over the
 * adapter vector (shared/noise.ts), and a batch decodes every member at once with per-row adapters: row b's
 * output for an adapted W is x_b·W + scale·(x_b·A_bᵀ)·B_bᵀ, which equals x_b·(W + scale·(B_b·A_b)ᵀ) without
 * ever forming the merged weight.
 */
import { loraFactors, type LoraLayout, type LoraSlot } from './lora.ts';
import { applyNoise, type NoiseKey } from './noise.ts';

/** A member's adapter vector θ + c·ε(key), a new array; θ is left as it was. */
export function memberAdapters(theta: Float32Array, layout: LoraLayout, key: NoiseKey, c: number): Float32Array {
  if (theta.length !== layout.length) throw new RangeError(`lora: θ has ${theta.length} elements, the layout ${layout.length}`);
  const out = theta.slice();
  applyNoise(out, key, c);
  return out;
}

/**
 * Y (rows × out) = X·W + scale·(X_b·A_bᵀ)·B_bᵀ per row b, with row b's adapters from `rowThetas[b]`; X is
 * rows × in and W in × out, row-major, summed in float64.
 */
export function adaptedMatmul(X: Float32Array, W: Float32Array, layout: LoraLayout, slot: LoraSlot, rowThetas: readonly Float32Array[]): Float32Array {
  const rows = rowThetas.length;
  const { in: n, out: m } = slot;
  const r = layout.rank;
  if (X.length !== rows * n) throw new RangeError(`lora: X has ${X.length} elements, expected ${rows}×${n}`);
  if (W.length !== n * m) throw new RangeError(`lora: ${slot.name} has ${W.length} elements, expected ${n}×${m}`);
  const Y = new Float32Array(rows * m);
  const xa = new Float64Array(r);
  for (let b = 0; b < rows; b++) {
    const { A, B } = loraFactors(rowThetas[b], layout, slot);
    for (let k = 0; k < r; k++) {
      let s = 0;
      for (let i = 0; i < n; i++) s += X[b * n + i] * A[k * n + i];
      xa[k] = s;
    }
    for (let j = 0; j < m; j++) {
      let s = 0;
      for (let i = 0; i < n; i++) s += X[b * n + i] * W[i * m + j];
      let d = 0;
      for (let k = 0; k < r; k++) d += xa[k] * B[j * r + k];
      Y[b * m + j] = s + layout.scale * d;
    }
  }
  return Y;
}
