/**
 * Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), in pure 32-bit
 * integer arithmetic so its output is bit-identical on every machine and every Node version.
 * JavaScript has no 32×32→64 multiply, so the high half is assembled from 16-bit limbs.
 */
const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

/** High 32 bits of the unsigned 64-bit product a·b. */
function mulhi(a: number, b: number): number {
  const aLo = a & 0xffff;
  const aHi = a >>> 16;
  const bLo = b & 0xffff;
  const bHi = b >>> 16;
  const lolo = aLo * bLo;
  const hilo = aHi * bLo;
  const lohi = aLo * bHi;
  const mid = (lolo >>> 16) + (hilo & 0xffff) + (lohi & 0xffff);
  return (aHi * bHi + (hilo >>> 16) + (lohi >>> 16) + Math.floor(mid / 65536)) >>> 0;
}

/** One Philox4x32-10 block: counter (4 words) and key (2 words) in, four uint32 out. */
export function philox4x32(c0: number, c1: number, c2: number, c3: number, k0: number, k1: number, out: Uint32Array): void {
  let x0 = c0 >>> 0;
  let x1 = c1 >>> 0;
  let x2 = c2 >>> 0;
  let x3 = c3 >>> 0;
  let key0 = k0 >>> 0;
  let key1 = k1 >>> 0;
  for (let round = 0; round < 10; round++) {
    const hi0 = mulhi(M0, x0);
    const lo0 = Math.imul(M0, x0) >>> 0;
    const hi1 = mulhi(M1, x2);
    const lo1 = Math.imul(M1, x2) >>> 0;
    const y0 = (hi1 ^ x1 ^ key0) >>> 0;
    const y2 = (hi0 ^ x3 ^ key1) >>> 0;
    x0 = y0;
    x1 = lo1;
    x2 = y2;
    x3 = lo0;
    key0 = (key0 + W0) >>> 0;
    key1 = (key1 + W1) >>> 0;
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}
