/**
 * IEEE binary16 (fp16) and bfloat16 conversions for half-precision exports: θ is held as an fp32 master
 * and written to the graph's dtype when a session reads it. Rounding is to nearest, ties to even, as
 * PyTorch's and numpy's casts; values past fp16's range become ±infinity, NaN stays NaN.
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The fp16 bits of `v`, rounded to nearest even. */
export function fp16Bits(v: number): number {
  f32[0] = v;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0); // inf / NaN
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow
  if (e <= 0) {
    if (e < -10) return sign; // underflow to ±0
    mant |= 0x800000; // subnormal: shift the implicit bit in, then round
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mant & ((1 << shift) - 1);
    let h = mant >>> shift;
    if (rest > half || (rest === half && (h & 1))) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1))) h++; // a carry into the exponent is still right
  return sign | h;
}

/** The value of fp16 bits `h` (exact in fp32). */
export function fp16Value(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** The bfloat16 bits of `v`, rounded to nearest even. */
export function bf16Bits(v: number): number {
  f32[0] = v;
  const x = u32[0];
  if ((x & 0x7f800000) === 0x7f800000 && x & 0x7fffff) return (x >>> 16) | 0x40; // NaN stays NaN
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bf16Value(h: number): number {
  u32[0] = h << 16;
  return f32[0];
}

/** Writes `src` into `dst` as half-precision bits (`dst.length` = `src.length`). */
export function toHalf(src: Float32Array, dst: Uint16Array, kind: 'fp16' | 'bf16'): void {
  if (kind === 'bf16') {
    for (let i = 0; i < src.length; i++) dst[i] = bf16Bits(src[i]);
    return;
  }
  // fp16Bits over the words in place: the normal range (most weights) is one add and shift, the rest
  // (subnormals, overflow, inf / NaN) goes through fp16Bits
  const words = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < words.length; i++) {
    const x = words[i];
    const exp = (x >>> 23) & 0xff;
    if (exp > 112 && exp < 143) {
      // round to nearest even on the 13 dropped bits; a carry into the exponent is still right
      const rounded = x + 0xfff + ((x >>> 13) & 1);
      dst[i] = ((x >>> 16) & 0x8000) | ((((rounded >>> 23) & 0xff) - 112) << 10) | ((rounded >>> 13) & 0x3ff);
    } else dst[i] = fp16Bits(src[i]);
  }
}

/** Reads half-precision bits into fp32 (exact: every fp16 and bf16 value is an fp32 value). */
export function fromHalf(src: Uint16Array, dst: Float32Array, kind: 'fp16' | 'bf16'): void {
  if (kind === 'bf16') {
    const out = new Uint32Array(dst.buffer, dst.byteOffset, dst.length);
    for (let i = 0; i < src.length; i++) out[i] = src[i] << 16;
    return;
  }
  const table = (fp16Table ??= Float32Array.from({ length: 65536 }, (_, h) => fp16Value(h)));
  for (let i = 0; i < src.length; i++) dst[i] = table[src[i]];
}

let fp16Table: Float32Array | undefined;
