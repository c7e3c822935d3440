/**
 * A second noise definition, made to be generated on a GPU by a graph of the 32-bit integer ops that
 * onnxruntime's WebGPU provider runs there (uint32 Mul, Add, Sub, Div and Cast; its Bitwise*, BitShift
 * and Mod fall back to the CPU, so Philox's XORs and the ziggurat's table walk with exp/log cannot be
 * expressed on the device). This file is its reference; trainer/perturbation/device-noise-graph.ts is the
 * graph, equal to it bit for bit.
 *
 * Element i (uint32) of member (runSeed, iteration, member): two keys (k0, k1) come from one Philox4x32-10
 * block of the member (on the host, once), h0 = mix(i·GOLDEN + k0) and h1 = mix(h0 + k1), `mix` six rounds
 * of x ← x + ⌊x / 2^s⌋, x ← x·M (mod 2^32) (XOR-shift-multiply with the XOR replaced by an addition, which
 * keeps each step a bijection), and the four 16-bit halves of h0 and h1 summed: S ∈ [0, 4·65535]. Then
 * ε = (S − 131070)·fl32(√3 / 65536), an Irwin–Hall(4) variable scaled to unit variance, bounded by ±3.47:
 * S and S − 131070 are integers below 2^24, exact in float32, so ε's one rounding is the multiplication.
 * θ + σε is fl32(θ + fl32(σ·ε)), each operation correctly rounded (IEEE 754 binary32, as WGSL requires of
 * f32 + and ×): the same bits on the CPU and any conforming device.
 *
 * A DRAFT (version 0): the add-for-XOR mixer is weak (test/model/device-noise.test.ts measures elements of
 * neighbouring keys correlating at up to ~0.02, where independent streams would show ~0.002), so a usable
 * version needs a stronger mixer of the same ops first. And it is not the stream of shared/noise.ts
 * (Gaussian, version 1): a run must use one definition for its members, its updates and its replay, so no
 * run uses this one (docs/MODEL.md, "GPU").
 */
import { philox4x32 } from './philox.ts';

export const DEVICE_NOISE_DEFINITION = { id: 'esopt-device-noise-draft', version: 0 } as const;

export const GOLDEN = 0x9e3779b1;
const MURMUR: ReadonlyArray<readonly [number, number]> = [
  [16, 0x85ebca6b],
  [13, 0xc2b2ae35],
  [16, 0x27d4eb2f],
];
/** (shift, multiplier) of mix's six rounds (murmur3's finalizer constants, twice). */
export const MIX_ROUNDS: ReadonlyArray<readonly [number, number]> = [...MURMUR, ...MURMUR];
/** The centre of S, 4 · 65535 / 2. */
export const CENTRE = 131070;
/** √3 / 65536 in float32: Var(S) = 4·(65536² − 1)/12, so ε has variance 1 − 2^−32. */
export const SCALE = Math.fround(Math.sqrt(3) / 65536);
const KEY_SALT = 0xd1ce0001;

/** The member's two keys: one Philox4x32-10 block with counter (member, iteration, 0, salt) and key (runSeed, 0). */
export function deviceNoiseKeys(runSeed: number, iteration: number, member: number): [number, number] {
  const out = new Uint32Array(4);
  philox4x32(member, iteration, 0, KEY_SALT, runSeed, 0, out);
  return [out[0], out[1]];
}

function mix(x: number): number {
  for (const [shift, m] of MIX_ROUNDS) {
    x = (x + (x >>> shift)) >>> 0;
    x = Math.imul(x, m) >>> 0;
  }
  return x;
}

/** ε of element `index` under keys (k0, k1). */
export function deviceNoiseAt(index: number, k0: number, k1: number): number {
  const h0 = mix((Math.imul(index, GOLDEN) + k0) >>> 0);
  const h1 = mix((h0 + k1) >>> 0);
  const s = (h0 >>> 16) + (h0 & 0xffff) + (h1 >>> 16) + (h1 & 0xffff);
  return Math.fround((s - CENTRE) * SCALE);
}

/** θ + σε over elements offset … offset + θ.length − 1 of the member's stream, as a new array. */
export function perturbedWithDeviceNoise(theta: Float32Array, offset: number, keys: readonly [number, number], sigma: number): Float32Array {
  const out = new Float32Array(theta.length);
  const s = Math.fround(sigma);
  for (let i = 0; i < theta.length; i++) out[i] = Math.fround(theta[i] + Math.fround(s * deviceNoiseAt((offset + i) >>> 0, keys[0], keys[1])));
  return out;
}
