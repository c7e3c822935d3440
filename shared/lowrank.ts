/**
 * Low-rank noise (EGGROLL): for a weight W (m×n, row-major) member i's perturbation is εᵢ = AᵢBᵢᵀ/√r with
 * Aᵢ (m×r) and Bᵢ (n×r) read from the member's ordinary seeded stream: A = ε[o : o+m·r], B = ε[o+m·r : o+(m+n)·r].
 * Nothing of size m×n is ever drawn; applying or accumulating costs O((m+n)·r) memory per member.
 */
import { fillNoise, type NoiseKey } from './noise.ts';

export interface LowRankFactors {
  /** m×r, row-major. */
  A: Float32Array;
  /** n×r, row-major. */
  B: Float32Array;
}

export function lowRankStreamLength(m: number, n: number, r: number): number {
  return (m + n) * r;
}

export function lowRankFactors(key: NoiseKey, m: number, n: number, r: number, offset = 0): LowRankFactors {
  const A = new Float32Array(m * r);
  const B = new Float32Array(n * r);
  fillNoise(A, key, offset);
  fillNoise(B, key, offset + m * r);
  return { A, B };
}

/** W += c·A·Bᵀ/√r, in place. */
export function applyLowRank(W: Float32Array, m: number, n: number, r: number, f: LowRankFactors, c: number): void {
  if (W.length !== m * n) throw new RangeError(`W has ${W.length} elements, expected ${m}×${n}`);
  const scale = c / Math.sqrt(r);
  const row = new Float64Array(r);
  for (let i = 0; i < m; i++) {
    for (let k = 0; k < r; k++) row[k] = f.A[i * r + k] * scale;
    const base = i * n;
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let k = 0; k < r; k++) s += row[k] * f.B[j * r + k];
      W[base + j] += s;
    }
  }
}

export interface LowRankTerm {
  key: NoiseKey;
  offset: number;
  coef: number;
}

/**
 * W += Σᵢ coefᵢ·AᵢBᵢᵀ/√r. The sum is formed row by row in float64 (in the order given), then added to W
 * once, so W sees one rounding per element; per member only its two factors are held.
 */
export function accumulateLowRank(W: Float32Array, m: number, n: number, r: number, terms: readonly LowRankTerm[]): void {
  if (W.length !== m * n) throw new RangeError(`W has ${W.length} elements, expected ${m}×${n}`);
  const factors = terms.map((t) => ({ f: lowRankFactors(t.key, m, n, r, t.offset), scale: t.coef / Math.sqrt(r) }));
  const rowSum = new Float64Array(n);
  for (let i = 0; i < m; i++) {
    rowSum.fill(0);
    for (const { f, scale } of factors) {
      for (let k = 0; k < r; k++) {
        const a = f.A[i * r + k] * scale;
        if (a === 0) continue;
        for (let j = 0; j < n; j++) rowSum[j] += a * f.B[j * r + k];
      }
    }
    const base = i * n;
    for (let j = 0; j < n; j++) W[base + j] += rowSum[j];
  }
}
