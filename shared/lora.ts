/**
 * LoRA-ES adapters (issue 34): for a targeted matmul weight W (in × out, as the ONNX MatMul reads x·W) the
 * adapter is A (r × in) and B (out × r), both row-major, and the adapted output is x·W + scale·(x·Aᵀ)·Bᵀ with
 * scale = alpha / r, so the merged weight is W + scale·(B·A)ᵀ. The adapters are θ in this mode; W never changes.
 * Initialisation follows PEFT: A is Kaiming-uniform with a = √5 (bound 1/√in) from a seed, B is zero, so an
 * untrained adapter leaves the model's outputs exactly as they were.
 */
import { z } from 'zod';
import { philox4x32 } from './philox.ts';
import { Targets } from './targets.ts';

export const LoraOptions = z
  .object({
    rank: z.number().int().min(1, 'must be at least 1').max(256, 'must be at most 256'),
    alpha: z.number().positive('must be positive').finite(),
    /** The matrices adapters attach to (shared/targets.ts); PEFT's usual choice is every linear layer. */
    targets: Targets.default('all-linear'),
  })
  .strict();
export type LoraOptions = z.output<typeof LoraOptions>;

/** One targeted matrix: its name and the MatMul's in and out widths. */
export interface LoraTarget {
  name: string;
  in: number;
  out: number;
}

/** Where one matrix's A and B lie in the flat adapter vector θ: A first, then B. */
export interface LoraSlot extends LoraTarget {
  aOffset: number;
  bOffset: number;
}

export interface LoraLayout {
  rank: number;
  scale: number;
  slots: LoraSlot[];
  /** Elements of θ: Σ r·(in + out). */
  length: number;
}

/** The adapter vector's layout, in the order the targets are given (that order is part of θ's definition). */
export function loraLayout(targets: readonly LoraTarget[], o: Pick<LoraOptions, 'rank' | 'alpha'>): LoraLayout {
  const r = o.rank;
  const slots: LoraSlot[] = [];
  let at = 0;
  for (const t of targets) {
    if (!(Number.isInteger(t.in) && t.in > 0 && Number.isInteger(t.out) && t.out > 0)) {
      throw new RangeError(`lora: ${t.name} has shape ${t.in}×${t.out}; a matmul weight needs positive integer widths`);
    }
    slots.push({ ...t, aOffset: at, bOffset: at + r * t.in });
    at += r * (t.in + t.out);
  }
  if (slots.length === 0) throw new Error('lora: no matrix to attach adapters to');
  return { rank: r, scale: o.alpha / r, slots, length: at };
}

/**
 * θ₀ for the adapters: each A Kaiming-uniform in ±1/√in drawn from Philox keyed by the seed, counter
 * (element / 4, slot index), so a slot's values do not depend on the other slots; each B zero.
 */
export function initLoraAdapters(layout: LoraLayout, seed: number): Float32Array {
  if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`lora: seed must be a non-negative integer, got ${seed}`);
  const theta = new Float32Array(layout.length);
  const out = new Uint32Array(4);
  const k0 = seed >>> 0;
  const k1 = Math.floor(seed / 2 ** 32) >>> 0;
  layout.slots.forEach((s, slot) => {
    const bound = 1 / Math.sqrt(s.in);
    const n = layout.rank * s.in;
    for (let e = 0; e < n; e += 4) {
      philox4x32(e / 4, 0, slot, 0x4c6f5241, k0, k1, out);
      for (let j = 0; j < 4 && e + j < n; j++) theta[s.aOffset + e + j] = (2 * ((out[j] + 0.5) / 2 ** 32) - 1) * bound;
    }
  });
  return theta;
}

/** A slot's A (r × in) and B (out × r), as views into θ. */
export function loraFactors(theta: Float32Array, layout: LoraLayout, slot: LoraSlot): { A: Float32Array; B: Float32Array } {
  if (theta.length !== layout.length) throw new RangeError(`lora: θ has ${theta.length} elements, the layout ${layout.length}`);
  const r = layout.rank;
  return { A: theta.subarray(slot.aOffset, slot.bOffset), B: theta.subarray(slot.bOffset, slot.bOffset + slot.out * r) };
}

/** W (in × out, row-major) merged with its adapter: a new array W + scale·(B·A)ᵀ, summed in float64. */
export function mergeLora(W: Float32Array, theta: Float32Array, layout: LoraLayout, slot: LoraSlot): Float32Array {
  if (W.length !== slot.in * slot.out) throw new RangeError(`lora: ${slot.name} has ${W.length} elements, expected ${slot.in}×${slot.out}`);
  const { A, B } = loraFactors(theta, layout, slot);
  const r = layout.rank;
  const merged = new Float32Array(W.length);
  for (let i = 0; i < slot.in; i++) {
    for (let j = 0; j < slot.out; j++) {
      let s = 0;
      for (let k = 0; k < r; k++) s += B[j * r + k] * A[k * slot.in + i];
      merged[i * slot.out + j] = W[i * slot.out + j] + layout.scale * s;
    }
  }
  return merged;
}
