import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { accumulateLowRank, applyLowRank, lowRankFactors, lowRankStreamLength } from '../../shared/lowrank.ts';
import { noise } from '../../shared/noise.ts';

describe('low-rank noise', () => {
  it('reads A then B from the member stream', () => {
    const key = { runSeed: 2, iteration: 1, member: 4 };
    const { A, B } = lowRankFactors(key, 3, 5, 2, 10);
    const eps = noise(key, lowRankStreamLength(3, 5, 2), 10);
    expect(Array.from(A)).toEqual(Array.from(eps.subarray(0, 6)));
    expect(Array.from(B)).toEqual(Array.from(eps.subarray(6)));
  });

  it('applyLowRank adds c·ABᵀ/√r', () => {
    const key = { runSeed: 1, iteration: 0, member: 0 };
    const [m, n, r] = [4, 3, 2];
    const f = lowRankFactors(key, m, n, r);
    const W = new Float32Array(m * n);
    applyLowRank(W, m, n, r, f, 0.5);
    for (let i = 0; i < m; i++)
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let k = 0; k < r; k++) s += f.A[i * r + k] * f.B[j * r + k];
        expect(W[i * n + j]).toBeCloseTo((0.5 * s) / Math.sqrt(r), 6);
      }
  });

  it('accumulate equals the dense sum of the members', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.double({ min: -2, max: 2, noNaN: true }), { minLength: 1, maxLength: 6 }),
        (m, n, r, coefs) => {
          const terms = coefs.map((coef, i) => ({ key: { runSeed: 9, iteration: 3, member: i }, offset: 7 * i, coef }));
          const acc = new Float32Array(m * n).fill(0.5);
          accumulateLowRank(acc, m, n, r, terms);
          const dense = new Float64Array(m * n).fill(0.5);
          for (const t of terms) {
            const f = lowRankFactors(t.key, m, n, r, t.offset);
            for (let i = 0; i < m; i++)
              for (let j = 0; j < n; j++) {
                let s = 0;
                for (let k = 0; k < r; k++) s += f.A[i * r + k] * f.B[j * r + k];
                dense[i * n + j] += (t.coef * s) / Math.sqrt(r);
              }
          }
          for (let i = 0; i < m * n; i++) expect(Math.abs(acc[i] - dense[i])).toBeLessThan(1e-5);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('rejects a W of the wrong size', () => {
    expect(() => accumulateLowRank(new Float32Array(5), 2, 3, 1, [])).toThrow(/expected 2×3/);
  });
});
