/**
 * A second noise definition, made to be generated on a GPU by a graph of the 32-bit integer ops that
 * onnxruntime's WebGPU provider runs there (uint32 Mul, Add, Sub, Div and Cast, int32 Range; its Bitwise*,
 * BitShift and Mod fall back to the CPU, so Philox's XORs and the ziggurat's table walk with exp/log cannot
 * be expressed on the device). This file is its reference; trainer/engine/perturbation/device-noise-graph.ts is
 * the graph, equal to it bit for bit.
 *
 * Element i of member (runSeed, iteration, member)'s stream: its block b = ⌊i / 2^32⌋ gives the two keys
 * (k0, k1), one Philox4x32-10 block of (member, iteration, b) made on the host once per block; within the
 * block, ε depends on i mod 2^32 and the keys only (`deviceNoiseAt`), so a device makes a tensor's ε from
 * its first element's index and the keys. Two mixed words come from six rounds of a nonlinear T-function
 * and a 16-bit rotation, each a bijection of the word (`deviceNoiseWords`; docs/REPLAY.md states them
 * exactly). S, a sum of the four 16-bit halves of the two words, lies in
 * [0, 4·65535]; ε = (S − 131070)·fl32(√3 / 65536), an Irwin–Hall(4) variable scaled to unit variance,
 * bounded by ±3.47: S − 131070 is an integer below 2^24, exact in float32, so ε's one rounding is the
 * multiplication. A member's weights are fl32(θ + fl32(σ·ε)), each operation correctly rounded (IEEE 754
 * binary32, as WGSL requires of f32 + and ×): the same bits on the CPU and any conforming device.
 *
 * A run uses one definition for its members, its updates and its replay (RunConfig `noise`).
 */
import { philox4x32 } from './philox.ts';

/** Any change that alters a bit of ε bumps `version` (docs/REPLAY.md). */
export const DEVICE_NOISE_DEFINITION = { id: 'esopt-device-noise', version: 1 } as const;
/** A member's stream (shared/noise.ts's NoiseKey has the same fields). */
export interface DeviceNoiseKey {
  runSeed: number;
  iteration: number;
  member: number;
}

/** Elements per key block: indices within a block are uint32. */
export const BLOCK = 2 ** 32;

export const GOLDEN = 0x9e3779b1;
/**
 * The odd constants C_r of mix's six rounds x ↦ rot16(x·(2x + C_r)): murmur3's and xxhash's multipliers.
 * 2x² + C·x with C odd is a permutation polynomial mod 2^32, so each round is a bijection of the word.
 */
export const ROUND_CONSTANTS = [0x85ebca6b, 0xc2b2ae35, 0x27d4eb2f, 0x165667b1, 0xd3a2646d, 0xfd7046c5] as const;
/** The centre of S, 4 · 65535 / 2. */
export const CENTRE = 131070;
/** √3 / 65536 in float32: Var(S) = 4·(65536² − 1)/12, so ε has variance 1 − 2^−32. */
export const SCALE = Math.fround(Math.sqrt(3) / 65536);
const KEY_SALT = 0xd1ce0001;

/** Block `block`'s two keys: one Philox4x32-10 block with counter (member, iteration, block, salt) and key (runSeed, 0). */
export function deviceNoiseKeys(key: DeviceNoiseKey, block: number): [number, number] {
  for (const [f, v] of [['runSeed', key.runSeed], ['iteration', key.iteration], ['member', key.member], ['block', block]] as const) {
    if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`device noise ${f} must be a uint32, got ${v}`);
  }
  const out = new Uint32Array(4);
  philox4x32(key.member, key.iteration, block, KEY_SALT, key.runSeed, 0, out);
  return [out[0], out[1]];
}

/**
 * One round: the T-function x·(2x + c) carries low bits upward through a product of the variable word with
 * itself, and the 16-bit rotation ⌊y / 2^16⌋ + y·2^16 (mod 2^32) carries the high half down.
 */
function round(x: number, c: number): number {
  const y = Math.imul((x + x + c) >>> 0, x) >>> 0;
  return ((y >>> 16) + Math.imul(y, 65536)) >>> 0;
}

/**
 * The two mixed words of element `index` of a block with keys (k0, k1): h0 = R3 R2 R1(R0(index·G + k0) + k1),
 * h1 = R5 R4(h0 + k0), R_r the round with C_r. Three rounds follow every key and the index, enough for each
 * input bit to flip each bit of h0 and h1 with probability ½ (test/engine/device-noise.test.ts).
 */
export function deviceNoiseWords(index: number, k0: number, k1: number): [number, number] {
  let x = (Math.imul(index, GOLDEN) + k0) >>> 0;
  x = round(x, ROUND_CONSTANTS[0]);
  x = (x + k1) >>> 0;
  for (let r = 1; r < 4; r++) x = round(x, ROUND_CONSTANTS[r]);
  const h0 = x;
  x = (h0 + k0) >>> 0;
  for (let r = 4; r < 6; r++) x = round(x, ROUND_CONSTANTS[r]);
  return [h0, x];
}

const [C0, C1, C2, C3, C4, C5] = ROUND_CONSTANTS.map((c) => c | 0);

/**
 * S, the sum of h0's and h1's 16-bit halves, computed as `deviceNoiseWords` defines them with the rounds
 * written out in int32 arithmetic (the same low 32 bits; the rotation's two halves never overlap, so its
 * addition is an OR): no tuple, no loop over the table, no uint32 value a double must hold, which is what
 * makes the host's updates and members fast. test/engine/device-noise.test.ts holds it to the words.
 */
export function deviceNoiseSum(index: number, k0: number, k1: number): number {
  let x = (Math.imul(index | 0, GOLDEN) + k0) | 0;
  let y = Math.imul((x + x + C0) | 0, x);
  x = (((y >>> 16) | (y << 16)) + k1) | 0;
  y = Math.imul((x + x + C1) | 0, x);
  x = (y >>> 16) | (y << 16);
  y = Math.imul((x + x + C2) | 0, x);
  x = (y >>> 16) | (y << 16);
  y = Math.imul((x + x + C3) | 0, x);
  const h0 = (y >>> 16) | (y << 16);
  x = (h0 + k0) | 0;
  y = Math.imul((x + x + C4) | 0, x);
  x = (y >>> 16) | (y << 16);
  y = Math.imul((x + x + C5) | 0, x);
  const h1 = (y >>> 16) | (y << 16);
  return (h0 >>> 16) + (h0 & 0xffff) + (h1 >>> 16) + (h1 & 0xffff);
}

/** ε of element `index` (i mod 2^32) of a block with keys (k0, k1). */
export function deviceNoiseAt(index: number, k0: number, k1: number): number {
  return Math.fround((deviceNoiseSum(index, k0, k1) - CENTRE) * SCALE);
}

/** Calls `each(block, from, count)` for the runs of [offset, offset + count) that stay in one key block. */
export function forEachBlock(offset: number, count: number, each: (block: number, from: number, count: number) => void): void {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`device noise offset must be a non-negative integer, got ${offset}`);
  if (!Number.isSafeInteger(count) || count < 0) throw new RangeError(`device noise count must be a non-negative integer, got ${count}`);
  for (let pos = offset, end = offset + count; pos < end; ) {
    const block = Math.floor(pos / BLOCK);
    const stop = Math.min(end, (block + 1) * BLOCK);
    each(block, pos, stop - pos);
    pos = stop;
  }
}

/** out[dest : dest+count] += c·ε[offset : offset+count], as shared/noise.ts's `applyNoise` does with its stream. */
export function applyDeviceNoise(out: Float32Array | Float64Array, key: DeviceNoiseKey, c: number, offset: number, dest: number, count: number): void {
  if (!Number.isInteger(dest) || dest < 0 || dest + count > out.length) throw new RangeError(`device noise destination [${dest}, ${dest + count}) outside an array of length ${out.length}`);
  forEachBlock(offset, count, (block, from, n) => {
    const [k0, k1] = deviceNoiseKeys(key, block);
    const base = dest + (from - offset);
    const index0 = from - block * BLOCK;
    for (let j = 0; j < n; j++) out[base + j] += c * deviceNoiseAt(index0 + j, k0, k1);
  });
}

/** A member's weights fl32(θ + fl32(σ·ε)) over elements offset … offset + θ.length − 1 of its stream, as a new array. */
export function perturbedWithDeviceNoise(theta: Float32Array, offset: number, key: DeviceNoiseKey, sigma: number): Float32Array {
  const out = new Float32Array(theta.length);
  const s = Math.fround(sigma);
  forEachBlock(offset, theta.length, (block, from, n) => {
    const [k0, k1] = deviceNoiseKeys(key, block);
    const index0 = from - block * BLOCK;
    for (let j = 0, i = from - offset; j < n; j++, i++) out[i] = Math.fround(theta[i] + Math.fround(s * deviceNoiseAt(index0 + j, k0, k1)));
  });
  return out;
}
