/**
 * Seeded Gaussian noise ε for a population member, regenerated on demand and never stored.
 *
 * The stream of member (runSeed, iteration, member) is cut into fixed chunks of CHUNK elements. Chunk c
 * is seeded by one Philox4x32-10 block with counter (c, 0, member, iteration) and key (runSeed, salt),
 * and filled by xoshiro128** feeding a 128-layer ziggurat. So any slice of any member's ε can be made
 * independently, in any order, in chunks, on any machine: chunk boundaries are a property of the stream,
 * not of the caller. Everything before the ziggurat is 32-bit integer arithmetic; the ziggurat's values
 * are products of those integers with a table, and its rare slow path uses Math.exp/log, which V8
 * computes with its own fdlibm port (the same bits on every platform).
 *
 * `applyNoise` adds c·ε[a:b] into θ (or into a Float64 accumulator) in place, with O(1) scratch state.
 */
import { philox4x32 } from './philox.ts';

export const CHUNK = 4096;
const SALT = 0x5eed0e50;

export interface NoiseKey {
  runSeed: number;
  iteration: number;
  member: number;
}

// ---- ziggurat tables (Marsaglia & Tsang 2000, 128 layers), scaled for a signed 25-bit integer ----
const ZN = 128;
const M1 = 2 ** 24;
const KN = new Int32Array(ZN);
const WN = new Float64Array(ZN);
const FN = new Float64Array(ZN);
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
})();

/** Generator state for one chunk; kept in a class so the hot loop reads fields V8 keeps unboxed. */
class ChunkStream {
  s0 = 0;
  s1 = 0;
  s2 = 0;
  s3 = 0;
  private readonly block = new Uint32Array(4);

  seed(key: NoiseKey, chunk: number): void {
    philox4x32(chunk >>> 0, Math.floor(chunk / 2 ** 32) >>> 0, key.member >>> 0, key.iteration >>> 0, key.runSeed >>> 0, SALT, this.block);
    this.s0 = this.block[0] | 0;
    this.s1 = this.block[1] | 0;
    this.s2 = this.block[2] | 0;
    this.s3 = this.block[3] | 0;
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1; // xoshiro's one forbidden state
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
    let u = this.next();
    let i = u & 127;
    let j = u >> 7;
    if ((j < 0 ? -j : j) < KN[i]) return j * WN[i];
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
      if ((j < 0 ? -j : j) < KN[i]) return j * WN[i];
    }
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

const shared = new ChunkStream();

/**
 * Visit ε[offset : offset+count] chunk by chunk: `visit(chunkStream, from, to, destIndex)` is called once
 * per touched chunk with the stream positioned at element `from` of the stream.
 */
function forEachChunk(key: NoiseKey, offset: number, count: number, visit: (s: ChunkStream, n: number, dest: number) => void): void {
  checkKey(key);
  if (!Number.isInteger(offset) || offset < 0) throw new RangeError(`noise offset must be a non-negative integer, got ${offset}`);
  if (!Number.isInteger(count) || count < 0) throw new RangeError(`noise count must be a non-negative integer, got ${count}`);
  const s = shared;
  let pos = offset;
  const end = offset + count;
  while (pos < end) {
    const chunk = Math.floor(pos / CHUNK);
    const chunkStart = chunk * CHUNK;
    const stop = Math.min(end, chunkStart + CHUNK);
    s.seed(key, chunk);
    for (let skip = pos - chunkStart; skip > 0; skip--) s.normal();
    visit(s, stop - pos, pos - offset);
    pos = stop;
  }
}

function checkKey(key: NoiseKey): void {
  for (const f of ['runSeed', 'iteration', 'member'] as const) {
    const v = key[f];
    if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`noise key ${f} must be a uint32, got ${v}`);
  }
}

/** ε[offset : offset+count] of one member as a new Float32Array. */
export function noise(key: NoiseKey, count: number, offset = 0): Float32Array {
  const out = new Float32Array(count);
  fillNoise(out, key, offset);
  return out;
}

/** Fill `out` with ε[offset : offset+out.length]. */
export function fillNoise(out: Float32Array | Float64Array, key: NoiseKey, offset = 0): void {
  forEachChunk(key, offset, out.length, (s, n, dest) => {
    for (let i = dest, e = dest + n; i < e; i++) out[i] = s.normal();
  });
}

/**
 * θ[start:end] += c·ε[offset+start : offset+end], in place, without allocating ε.
 * `offset` is where θ[0] sits in the member's stream (a tensor inside a flat parameter vector).
 */
export function applyNoise(theta: Float32Array | Float64Array, key: NoiseKey, c: number, offset = 0, start = 0, end = theta.length): void {
  if (start < 0 || end > theta.length || start > end) throw new RangeError(`applyNoise range [${start}, ${end}) outside θ of length ${theta.length}`);
  forEachChunk(key, offset + start, end - start, (s, n, dest) => {
    for (let i = start + dest, e = start + dest + n; i < e; i++) theta[i] += c * s.normal();
  });
}
