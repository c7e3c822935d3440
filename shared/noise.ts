/**
 * Seeded Gaussian noise ε for a population member, regenerated on demand and never stored.
 *
 * The stream of member (runSeed, iteration, member) is cut into fixed chunks of CHUNK elements. Chunk c
 * is seeded by one Philox4x32-10 block with counter (c, 0, member, iteration) and key (runSeed, salt),
 * and filled by xoshiro128** feeding a 128-layer ziggurat. So any slice of any member's ε can be made
 * independently, in any order, in chunks, on any machine: chunk boundaries are a property of the stream,
 * not of the caller. Everything before the ziggurat is 32-bit integer arithmetic; the ziggurat's values
 * are products of those integers with a table, and its rare slow path uses Math.exp/log, which V8
 * computes with its own fdlibm port (the same bits on every platform; a V8 whose Math.log is no longer
 * fdlibm's would change the tail, docs/REPLAY.md §4).
 *
 * `applyNoise` adds c·ε[a:b] into θ (or into a Float64 accumulator) in place, with O(1) scratch state.
 *
 * Two kernels compute the same stream: the JavaScript one below (the reference, and the fallback), and
 * a WebAssembly SIMD one (shared/noise-wasm/) that runs four chunks in i32x4 lanes. They agree bit for
 * bit (test/shared/noise-wasm.test.ts); the public functions use wasm wherever the engine has it.
 *
 * One file past 300 lines because the stream is defined in one place: its seeding, generator, ziggurat
 * tables and the reference kernel that reads them change together, and the wasm kernel is held to them.
 */
import { type FixupSink, type SavedElements, WasmNoiseKernel } from './noise-wasm/wasm-noise.ts';

export type { FixupSink, SavedElements };
import { philox4x32 } from './philox.ts';
import { applyDeviceNoise } from './device-noise.ts';
import type { DeviceNoiseName } from './noise-definition.ts';

export const CHUNK = 4096;
const SALT = 0x5eed0e50;

/**
 * Names this stream's definition (chunking, seeding, generator, ziggurat, float32 ε) in exported runs
 * (docs/REPLAY.md): any change that alters a single bit of ε must bump `version`.
 */
export const NOISE_DEFINITION = { id: 'esopt-noise', version: 1 } as const;

export interface NoiseKey {
  runSeed: number;
  iteration: number;
  member: number;
  /**
   * The run's noise definition when it is not this file's (shared/noise-definition.ts): the entry points below
   * then make shared/device-noise.ts's stream, with its JavaScript kernel (the wasm kernel is this stream's only).
   */
  definition?: DeviceNoiseName;
}

/** Whether `key` names the device definition, whose ε this file's kernels do not make. */
export function isDeviceKey(key: NoiseKey): boolean {
  return key.definition === 'esopt-device-noise';
}

// ---- ziggurat tables (Marsaglia & Tsang 2000, 128 layers), scaled for a signed 25-bit integer ----
const ZN = 128;
const M1 = 2 ** 24;
const KN = new Int32Array(ZN);
const WN = new Float64Array(ZN);
const FN = new Float64Array(ZN);
/** Acceptance thresholds in value space: KN[i]·WN[i]. */
const XN = new Float64Array(ZN);
const R = 3.442619855899;
(() => {
  let dn = R;
  let tn = dn;
  const vn = 9.91256303526217e-3;
  const q = vn / Math.exp(-0.5 * dn * dn);
  KN[0] = Math.floor((dn / q) * M1);
  KN[1] = 0;
  WN[0] = q / M1;
  WN[ZN - 1] = dn / M1;
  FN[0] = 1;
  FN[ZN - 1] = Math.exp(-0.5 * dn * dn);
  for (let i = ZN - 2; i >= 1; i--) {
    dn = Math.sqrt(-2 * Math.log(vn / dn + Math.exp(-0.5 * dn * dn)));
    KN[i + 1] = Math.floor((dn / tn) * M1);
    tn = dn;
    FN[i] = Math.exp(-0.5 * dn * dn);
    WN[i] = dn / M1;
  }
  for (let i = 0; i < ZN; i++) XN[i] = KN[i] * WN[i];
})();

const seedBlock = new Uint32Array(4);

/** The xoshiro128** state (s0..s3) that starts `chunk` of the stream of `key`: one Philox4x32-10 block. */
function seedChunk(key: NoiseKey, chunk: number, state: Int32Array): void {
  philox4x32(chunk >>> 0, Math.floor(chunk / 2 ** 32) >>> 0, key.member >>> 0, key.iteration >>> 0, key.runSeed >>> 0, SALT, seedBlock);
  for (let k = 0; k < 4; k++) state[k] = seedBlock[k] | 0;
  if ((state[0] | state[1] | state[2] | state[3]) === 0) state[0] = 1; // xoshiro's one forbidden state
}

/** Generator state for one chunk. The hot loop copies it into locals; this object serves skips and the slow path. */
class ChunkStream {
  s0 = 0;
  s1 = 0;
  s2 = 0;
  s3 = 0;
  private readonly state = new Int32Array(4);

  seed(key: NoiseKey, chunk: number): void {
    seedChunk(key, chunk, this.state);
    this.s0 = this.state[0];
    this.s1 = this.state[1];
    this.s2 = this.state[2];
    this.s3 = this.state[3];
  }

  /** xoshiro128**: one signed 32-bit output. */
  next(): number {
    const s1 = this.s1;
    const result = Math.imul(rotl(Math.imul(s1, 5), 7), 9);
    const t = s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= s1;
    this.s1 = s1 ^ this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  uniform(): number {
    return (this.next() >>> 0) * 2.3283064365386963e-10 + 1.1641532182693481e-10; // (0, 1)
  }

  /** One N(0,1) draw. Layer from the low 7 bits, value from the high 25: the two never share a bit. */
  normal(): number {
    const u = this.next();
    const i = u & 127;
    const x = (u >> 7) * WN[i];
    if (Math.abs(x) < XN[i]) return x;
    return this.normalTail(i, u >> 7);
  }

  /** The ziggurat's slow path for a draw (layer i, value j) that fell outside its layer's rectangle. */
  normalTail(layer: number, value: number): number {
    let i = layer;
    let j = value;
    let u: number;
    for (;;) {
      const x = j * WN[i];
      if (i === 0) {
        let xt: number;
        let y: number;
        do {
          xt = -Math.log(this.uniform()) / R;
          y = -Math.log(this.uniform());
        } while (y + y < xt * xt);
        return j > 0 ? R + xt : -R - xt;
      }
      if (FN[i] + this.uniform() * (FN[i - 1] - FN[i]) < Math.exp(-0.5 * x * x)) return x;
      u = this.next();
      i = u & 127;
      j = u >> 7;
      const retry = j * WN[i];
      if (Math.abs(retry) < XN[i]) return retry;
    }
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

const stream = new ChunkStream();

function checkKey(key: NoiseKey): void {
  if (key.definition !== undefined && key.definition !== 'esopt-device-noise') throw new RangeError(`noise key definition must be absent or 'esopt-device-noise', got ${String(key.definition)}`);
  for (const f of ['runSeed', 'iteration', 'member'] as const) {
    const v = key[f];
    if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`noise key ${f} must be a uint32, got ${v}`);
  }
}

/**
 * The one hot loop: out[dest+i] += c·ε[pos+i] for i < n, where [pos, pos+n) lies in one
 * chunk. xoshiro128** and the ziggurat's fast path are inlined on local variables (about 3× faster than
 * calling methods that keep the state on an object); the rare slow path syncs the state back and calls out.
 */
function chunkKernel(key: NoiseKey, pos: number, n: number, out: Float32Array | Float64Array, dest: number, c: number): void {
  const chunk = Math.floor(pos / CHUNK);
  const s = stream;
  s.seed(key, chunk);
  for (let skip = pos - chunk * CHUNK; skip > 0; skip--) s.normal();
  let s0 = s.s0;
  let s1 = s.s1;
  let s2 = s.s2;
  let s3 = s.s3;
  const xn = XN;
  const wn = WN;
  for (let i = dest, e = dest + n; i < e; i++) {
    const m5 = Math.imul(s1, 5);
    const u = Math.imul((m5 << 7) | (m5 >>> 25), 9);
    const t = s1 << 9;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = (s3 << 11) | (s3 >>> 21);
    const layer = u & 127;
    let x = (u >> 7) * wn[layer];
    // Compare in value space (|j|·w < k·w): a float compare with no integer abs keeps V8's loop tight.
    if (Math.abs(x) >= xn[layer]) {
      s.s0 = s0;
      s.s1 = s1;
      s.s2 = s2;
      s.s3 = s3;
      x = s.normalTail(layer, u >> 7);
      s0 = s.s0;
      s1 = s.s1;
      s2 = s.s2;
      s3 = s.s3;
    }
    // ε is defined as the float32 value, so θ += c·ε agrees with `noise()` output wherever it is used.
    out[i] += c * Math.fround(x);
  }
}

/** out[dest : dest+count] += c·ε[offset : offset+count] with the JavaScript kernel, one stream chunk at a time. */
function applyJs(key: NoiseKey, offset: number, count: number, out: Float32Array | Float64Array, dest: number, c: number): void {
  let pos = offset;
  const end = offset + count;
  while (pos < end) {
    const stop = Math.min(end, (Math.floor(pos / CHUNK) + 1) * CHUNK);
    chunkKernel(key, pos, stop - pos, out, dest + (pos - offset), c);
    pos = stop;
  }
}

/**
 * The WebAssembly SIMD kernel (shared/noise-wasm/): the same stream bit for bit, about 1.6× the
 * JavaScript kernel's throughput on the 2^24 benchmark. It is handed the stream's definition (tables,
 * chunk seeding) rather than importing it from here, so the dependency points one way.
 */
const wasmKernel = WasmNoiseKernel.create({ W: WN, X: XN, F: FN, seedChunk });

export type NoiseKernelName = 'wasm' | 'js';

/** The kernel `applyNoise`, `fillNoise` and `noise` use: wasm wherever WebAssembly SIMD is available. */
export const activeNoiseKernel: NoiseKernelName = wasmKernel ? 'wasm' : 'js';

/** out[dest : dest+count] += c·ε[offset : offset+count] with the named kernel (tests cross-check the two). */
export function applyNoiseWith(kernel: NoiseKernelName, out: Float32Array | Float64Array, key: NoiseKey, c: number, offset: number, dest: number, count: number): void {
  checkKey(key);
  if (!Number.isInteger(offset) || offset < 0) throw new RangeError(`noise offset must be a non-negative integer, got ${offset}`);
  if (!Number.isInteger(count) || count < 0) throw new RangeError(`noise count must be a non-negative integer, got ${count}`);
  if (!Number.isInteger(dest) || dest < 0 || dest + count > out.length) throw new RangeError(`noise destination [${dest}, ${dest + count}) outside an array of length ${out.length}`);
  if (isDeviceKey(key)) applyDeviceNoise(out, key, c, offset, dest, count);
  else if (kernel === 'wasm') {
    if (!wasmKernel) throw new Error('the WebAssembly noise kernel is not available here');
    wasmKernel.apply(key, offset, count, out, dest, c);
  } else applyJs(key, offset, count, out, dest, c);
}

/** ε[offset : offset+count] of one member as a new Float32Array. */
export function noise(key: NoiseKey, count: number, offset = 0): Float32Array {
  const out = new Float32Array(count);
  fillNoise(out, key, offset);
  return out;
}

/** Fill `out` with ε[offset : offset+out.length]. */
export function fillNoise(out: Float32Array | Float64Array, key: NoiseKey, offset = 0): void {
  out.fill(0);
  applyNoiseWith(activeNoiseKernel, out, key, 1, offset, 0, out.length);
}

/**
 * θ[start:end] += c·ε[offset+start : offset+end], in place, without allocating ε.
 * `offset` is where θ[0] sits in the member's stream (a tensor inside a flat parameter vector).
 */
export function applyNoise(theta: Float32Array | Float64Array, key: NoiseKey, c: number, offset = 0, start = 0, end = theta.length): void {
  if (start < 0 || end > theta.length || start > end) throw new RangeError(`applyNoise range [${start}, ${end}) outside θ of length ${theta.length}`);
  applyNoiseWith(activeNoiseKernel, theta, key, c, offset + start, start, end - start);
}

/**
 * Full mode's exact perturbation of θ[start:end] (stream offset `offset` as in `applyNoise`) in the
 * WebAssembly kernel: each element becomes a float32 next to θ + c·ε from which θ comes back as
 * fl32(t − c·ε); elements with none go to `fixups` (index into θ, value before). The rule itself and
 * its JavaScript reference live in trainer/engine/perturbation/exact-perturbation.ts, which calls this where
 * `activeNoiseKernel` is 'wasm'.
 */
export function perturbExactWasm(theta: Float32Array, key: NoiseKey, c: number, offset: number, start: number, end: number, fixups: FixupSink): void {
  checkKey(key);
  if (isDeviceKey(key)) throw new Error('the WebAssembly kernel makes esopt-noise only; perturb device-noise keys with the JavaScript rule');
  if (!wasmKernel) throw new Error('the WebAssembly noise kernel is not available here');
  if (start < 0 || end > theta.length || start > end) throw new RangeError(`perturbExactWasm range [${start}, ${end}) outside θ of length ${theta.length}`);
  wasmKernel.perturbExact(key, offset + start, end - start, theta, start, c, fixups);
}

/**
 * θ (one segment, stream offset `offset`) perturbed exactly with cFrom·ε_key, with `saved` its fix-ups,
 * turned into θ perturbed exactly with cTo·ε_key in one generation of ε (the WebAssembly kernel's
 * `switchExact`): the same bits as restoring, then `perturbExactWasm` with cTo.
 */
export function switchExactWasm(theta: Float32Array, key: NoiseKey, offset: number, cFrom: number, saved: SavedElements, cTo: number, fixups: FixupSink): void {
  checkKey(key);
  if (isDeviceKey(key)) throw new Error('the WebAssembly kernel makes esopt-noise only; switch device-noise keys with the JavaScript rule');
  if (!wasmKernel) throw new Error('the WebAssembly noise kernel is not available here');
  wasmKernel.switchExact(key, offset, theta.length, theta, 0, cFrom, saved, cTo, fixups);
}
