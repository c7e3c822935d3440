import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyDenseUpdate, ask, centeredRanks, coefficients, layoutSegments, shapeRewards, tell, zscore, type ParameterSegment } from '../../shared/es.ts';
import { CHUNK, noise } from '../../shared/noise.ts';

const rewardsArb = fc.array(fc.double({ min: -1e3, max: 1e3, noNaN: true }), { minLength: 2, maxLength: 40 });
const distinct = (rs: number[]) => new Set(rs).size > 1;

function segmentsOf(n: number, fill = 0.1): ParameterSegment[] {
  const a = new Float32Array(Math.floor(n / 3)).fill(fill);
  const b = new Float32Array(n - a.length).fill(-fill);
  return layoutSegments([
    { name: 'a', data: a },
    { name: 'b', data: b },
  ]);
}

function step(rewards: number[], opts: { antithetic?: boolean; alpha?: number; shaping?: 'zscore' | 'centered-rank' | 'none'; n?: number; chunk?: number } = {}) {
  const options = { population: rewards.length, antithetic: opts.antithetic ?? false, alpha: opts.alpha ?? 0.05, shaping: opts.shaping ?? ('zscore' as const) };
  const members = ask(options);
  const result = tell(members, new Map(rewards.map((r, i) => [i, [r]])), options);
  const segs = segmentsOf(opts.n ?? 257);
  applyDenseUpdate(segs, 3, 1, result.coefficients, { chunk: opts.chunk });
  return { result, theta: Float32Array.from(segs.flatMap((s) => Array.from(s.data))) };
}

describe('ES core: ask', () => {
  it('pairs antithetic members on one noise index with opposite signs', () => {
    expect(ask({ population: 4, antithetic: true })).toEqual([
      { index: 0, noiseIndex: 0, sign: 1 },
      { index: 1, noiseIndex: 0, sign: -1 },
      { index: 2, noiseIndex: 1, sign: 1 },
      { index: 3, noiseIndex: 1, sign: -1 },
    ]);
    expect(() => ask({ population: 3, antithetic: true })).toThrow(/even population/);
  });
});

describe('ES core: reward shaping (property tests)', () => {
  it('z-scored rewards have mean 0 and unit std', () => {
    fc.assert(
      fc.property(rewardsArb.filter(distinct), (rs) => {
        const z = zscore(rs);
        const mean = z.reduce((a, b) => a + b, 0) / z.length;
        const std = Math.sqrt(z.reduce((a, b) => a + (b - mean) ** 2, 0) / z.length);
        // With std ≥ spread/√(2G) ≥ 0.1, the +1e-8 in the denominator moves the std by < 1e-7.
        fc.pre(Math.max(...rs) - Math.min(...rs) > 1);
        expect(Math.abs(mean)).toBeLessThan(1e-9);
        expect(Math.abs(std - 1)).toBeLessThan(1e-6);
      }),
    );
  });

  it('equal rewards give no update at all', () => {
    const { result, theta } = step([2, 2, 2, 2]);
    expect(result.normalized).toEqual([0, 0, 0, 0]);
    expect(result.coefficients).toEqual([]);
    expect(theta).toEqual(Float32Array.from(segmentsOf(257).flatMap((s) => Array.from(s.data))));
  });

  it('centred ranks lie in [−0.5, 0.5], sum to 0 and share ties', () => {
    fc.assert(
      fc.property(rewardsArb, (rs) => {
        const r = centeredRanks(rs);
        expect(Math.abs(r.reduce((a, b) => a + b, 0))).toBeLessThan(1e-9);
        for (const v of r) expect(Math.abs(v)).toBeLessThanOrEqual(0.5);
      }),
    );
    expect(centeredRanks([5, 1, 5, 3])).toEqual([(2.5 / 3) - 0.5, -0.5, (2.5 / 3) - 0.5, 1 / 3 - 0.5]);
  });
});

describe('ES core: update (property tests)', () => {
  it('matches θ + α/G Σ R̂ᵢ εᵢ computed by hand', () => {
    const rewards = [1, 0, 3, 0.5];
    const { result, theta } = step(rewards, { n: 50 });
    const before = Float32Array.from(segmentsOf(50).flatMap((s) => Array.from(s.data)));
    for (let k = 0; k < 50; k++) {
      let delta = 0;
      for (let i = 0; i < 4; i++) delta += (0.05 / 4) * result.normalized[i] * noise({ runSeed: 3, iteration: 1, member: i }, 1, k)[0];
      expect(theta[k]).toBeCloseTo(before[k] + delta, 6);
    }
  });

  it('is invariant to affine transforms a·R + b (a > 0) of the rewards', () => {
    fc.assert(
      fc.property(rewardsArb.filter(distinct), fc.double({ min: 0.01, max: 100, noNaN: true }), fc.double({ min: -100, max: 100, noNaN: true }), (rs, a, b) => {
        // Keep both reward scales well above the 1e-8 the z-score adds to the std.
        const spread = Math.max(...rs) - Math.min(...rs);
        fc.pre(spread > 1 && a * spread > 1);
        const x = step(rs, { n: 64 }).theta;
        const y = step(rs.map((r) => a * r + b), { n: 64 }).theta;
        for (let i = 0; i < x.length; i++) expect(Math.abs(x[i] - y[i])).toBeLessThan(1e-5);
      }),
      { numRuns: 50 },
    );
  });

  it('antithetic pairs with equal rewards cancel exactly', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: -10, max: 10, noNaN: true }), { minLength: 1, maxLength: 10 }), (pairRewards) => {
        const rewards = pairRewards.flatMap((r) => [r, r]);
        const { result, theta } = step(rewards, { antithetic: true, n: 64 });
        expect(result.coefficients).toEqual([]);
        expect(theta).toEqual(Float32Array.from(segmentsOf(64).flatMap((s) => Array.from(s.data))));
      }),
      { numRuns: 50 },
    );
  });

  it('is linear in α', () => {
    fc.assert(
      fc.property(rewardsArb.filter(distinct), fc.double({ min: 0.001, max: 1, noNaN: true }), (rs, alpha) => {
        fc.pre(Math.max(...rs) - Math.min(...rs) > 1e-3);
        const base = Float32Array.from(segmentsOf(64).flatMap((s) => Array.from(s.data)));
        const d1 = step(rs, { alpha, n: 64 }).theta.map((v, i) => v - base[i]);
        const d2 = step(rs, { alpha: 2 * alpha, n: 64 }).theta.map((v, i) => v - base[i]);
        for (let i = 0; i < d1.length; i++) expect(Math.abs(d2[i] - 2 * d1[i])).toBeLessThan(1e-5);
      }),
      { numRuns: 50 },
    );
  });

  it('does not depend on member order', () => {
    fc.assert(
      fc.property(rewardsArb.filter(distinct), fc.integer(), (rs, seed) => {
        const options = { population: rs.length, antithetic: false, alpha: 0.1, shaping: 'zscore' as const };
        const members = ask(options);
        const shuffled = [...members].sort((a, b) => ((a.index * 7919 + seed) % 13) - ((b.index * 7919 + seed) % 13));
        const rewards = new Map(rs.map((r, i) => [i, [r]]));
        const a = segmentsOf(64);
        const b = segmentsOf(64);
        applyDenseUpdate(a, 1, 2, tell(members, rewards, options).coefficients);
        applyDenseUpdate(b, 1, 2, [...tell(shuffled, rewards, options).coefficients].reverse());
        expect(a.map((s) => Array.from(s.data))).toEqual(b.map((s) => Array.from(s.data)));
      }),
      { numRuns: 30 },
    );
  });

  it('chunked update equals the one-shot update', () => {
    fc.assert(
      fc.property(rewardsArb.filter(distinct), fc.integer({ min: 97, max: 5000 }), (rs, chunk) => {
        const n = 2 * CHUNK + 300;
        const oneShot = step(rs, { n, chunk: n }).theta;
        const chunked = step(rs, { n, chunk }).theta;
        for (let i = 0; i < n; i++) expect(Math.abs(oneShot[i] - chunked[i])).toBeLessThan(1e-6);
      }),
      { numRuns: 10 },
    );
  });

  it('shaping counts only members whose rewards arrived, averaging several episodes', () => {
    const members = ask({ population: 6, antithetic: false });
    const shaped = shapeRewards(members, new Map([[0, [1, 2]], [2, [0]], [5, [4]]]), 'zscore');
    expect(shaped.counted.map((m) => m.index)).toEqual([0, 2, 5]);
    expect(shaped.memberRewards).toEqual([1.5, 0, 4]);
    expect(shaped.normalized).toEqual(zscore([1.5, 0, 4]));
    expect(() => shapeRewards(members, new Map([[0, [Number.NaN]]]), 'zscore')).toThrow(/non-finite/);
  });

  it('coefficients weigh each noise index by its members\' signed shaped rewards, α/G each', () => {
    const members = ask({ population: 6, antithetic: true });
    // Members 0, 1 (noise 0, ±) and 4 (noise 2, +) reported: G = 3.
    const c = coefficients([members[0], members[1], members[4]], [0.5, -1, 2], 0.3);
    expect(c).toEqual([
      { noiseIndex: 0, coef: (0.3 / 3) * (0.5 + 1) },
      { noiseIndex: 2, coef: (0.3 / 3) * 2 },
    ]);
    expect(coefficients([members[0], members[1]], [1, 1], 0.3)).toEqual([]);
    expect(() => coefficients([members[0]], [1, 2], 0.3)).toThrow(/1 members but 2/);
  });

  it('tell is shaping then coefficients: a replay from the shaped rewards gives the same coefficients bit for bit', () => {
    fc.assert(
      fc.property(fc.array(fc.array(fc.double({ min: -50, max: 50, noNaN: true }), { maxLength: 3 }), { minLength: 2, maxLength: 16 }), fc.boolean(), (perMember, antithetic) => {
        const population = antithetic ? perMember.length - (perMember.length % 2) : perMember.length;
        const options = { population, antithetic, alpha: 0.07, shaping: 'centered-rank' as const };
        const members = ask(options);
        const told = tell(members, new Map(perMember.slice(0, population).map((rs, i) => [i, rs])), options);
        const byIndex = new Map(members.map((m) => [m.index, m]));
        // What a log entry keeps: the counted members' noise and sign, and their shaped rewards.
        expect(coefficients(told.counted.map((i) => byIndex.get(i)!), told.normalized, options.alpha)).toEqual(told.coefficients);
        expect(told.memberRewards).toEqual(perMember.filter((rs, i) => i < population && rs.length > 0).map((rs) => rs.reduce((a, b) => a + b, 0) / rs.length));
      }),
      { numRuns: 50 },
    );
  });

  it('applies decoupled weight decay', () => {
    const segs = segmentsOf(10, 1);
    applyDenseUpdate(segs, 0, 0, [], { decay: 0.1 });
    expect(Array.from(segs[0].data)).toEqual(Array.from(new Float32Array(3).fill(0.9)));
  });
});
