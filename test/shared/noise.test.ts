import { describe, expect, it } from 'vitest';
import { applyNoise, CHUNK, fillNoise, noise } from '../../shared/noise.ts';
import { NoisePool } from '../../shared/noise-pool.ts';

const key = { runSeed: 1, iteration: 0, member: 0 };

/** Φ(x) via erf (Abramowitz–Stegun 7.1.26 is too coarse for a KS test; use a series/continued fraction). */
function normalCdf(x: number): number {
  // erfc by its continued fraction for |x| large, Taylor series otherwise: accurate to ~1e-14.
  const z = Math.abs(x) / Math.SQRT2;
  let erf: number;
  if (z < 3) {
    let sum = z;
    let term = z;
    for (let k = 1; k < 200; k++) {
      term *= (-z * z) / k;
      const add = term / (2 * k + 1);
      sum += add;
      if (Math.abs(add) < 1e-17) break;
    }
    erf = (2 / Math.sqrt(Math.PI)) * sum;
  } else {
    let f = 0;
    for (let k = 60; k >= 1; k--) f = k / 2 / (z + f);
    erf = 1 - Math.exp(-z * z) / Math.sqrt(Math.PI) / (z + f);
  }
  return x >= 0 ? 0.5 * (1 + erf) : 0.5 * (1 - erf);
}

function moments(xs: Float32Array) {
  let mean = 0;
  for (const x of xs) mean += x;
  mean /= xs.length;
  let m2 = 0;
  let m4 = 0;
  for (const x of xs) {
    const d = x - mean;
    m2 += d * d;
    m4 += d ** 4;
  }
  m2 /= xs.length;
  m4 /= xs.length;
  return { mean, variance: m2, kurtosis: m4 / (m2 * m2) };
}

function correlation(a: Float32Array, b: Float32Array): number {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
}

describe('seeded noise', () => {
  it('pins the stream with golden vectors', () => {
    expect(Array.from(noise(key, 8))).toEqual([
      0.014440858736634254, -0.05410512909293175, 0.10306349396705627, 1.046676516532898, -0.3453894257545471, 0.10528625547885895,
      0.24949410557746887, -0.015497351065278053,
    ]);
    // Straddles the chunk boundary at 4096.
    expect(Array.from(noise({ runSeed: 42, iteration: 3, member: 7 }, 6, 4093))).toEqual([
      -1.1979492902755737, 0.6566711664199829, -0.45666083693504333, 2.326317548751831, -0.4478297233581543, -1.0870311260223389,
    ]);
    expect(Array.from(noise({ runSeed: 0xffffffff, iteration: 123456, member: 99 }, 4, 1_000_000))).toEqual([
      -0.585776150226593, -0.9237752556800842, 0.7099382281303406, -0.050963178277015686,
    ]);
  });

  it('chunked, out-of-order and offset generation equal one-shot generation bit for bit', () => {
    const n = 3 * CHUNK + 123;
    const whole = noise(key, n);
    const pieces = new Float32Array(n);
    const cuts = [0, 1, 17, CHUNK - 1, CHUNK, CHUNK + 5, 2 * CHUNK + 999, n];
    const order = [5, 0, 3, 6, 1, 4, 2];
    for (const k of order) pieces.set(noise(key, cuts[k + 1] - cuts[k], cuts[k]), cuts[k]);
    expect(pieces).toEqual(whole);
  });

  it('applyNoise adds c·ε in place, for a sub-range and an offset into the stream', () => {
    const n = 2 * CHUNK + 10;
    const eps = noise(key, n + 500);
    const theta = new Float32Array(n).fill(1);
    applyNoise(theta, key, 0.5, 500, 100, n - 7);
    for (let i = 0; i < n; i++) {
      const expected = i >= 100 && i < n - 7 ? Math.fround(1 + 0.5 * eps[500 + i]) : 1;
      expect(theta[i]).toBe(expected);
    }
    const f64 = new Float64Array(10).fill(Number.NaN);
    fillNoise(f64, key, 3);
    expect(Array.from(f64)).toEqual(Array.from(eps.subarray(3, 13)));
  });

  it('is N(0,1): mean, variance, kurtosis and a Kolmogorov–Smirnov test', () => {
    const n = 200_000;
    const xs = noise({ runSeed: 7, iteration: 2, member: 3 }, n);
    const m = moments(xs);
    expect(Math.abs(m.mean)).toBeLessThan(5 / Math.sqrt(n));
    expect(Math.abs(m.variance - 1)).toBeLessThan(5 * Math.sqrt(2 / n));
    expect(Math.abs(m.kurtosis - 3)).toBeLessThan(5 * Math.sqrt(24 / n));
    const sorted = Float64Array.from(xs).sort();
    let d = 0;
    for (let i = 0; i < n; i++) {
      const cdf = normalCdf(sorted[i]);
      d = Math.max(d, Math.abs(cdf - i / n), Math.abs((i + 1) / n - cdf));
    }
    expect(d).toBeLessThan(1.95 / Math.sqrt(n)); // α = 0.001
  });

  it('draws tails at the normal rate (the ziggurat slow path works)', () => {
    const n = 400_000;
    const xs = noise({ runSeed: 11, iteration: 0, member: 0 }, n);
    const beyond3 = xs.filter((x) => Math.abs(x) > 3).length / n;
    const beyond4 = xs.filter((x) => Math.abs(x) > 3.5).length / n;
    expect(beyond3).toBeGreaterThan(0.0027 * 0.8);
    expect(beyond3).toBeLessThan(0.0027 * 1.2);
    expect(beyond4).toBeGreaterThan(0.000465 * 0.6);
    expect(beyond4).toBeLessThan(0.000465 * 1.4);
  });

  it('members, iterations and run seeds are uncorrelated', () => {
    const n = 100_000;
    const base = noise({ runSeed: 5, iteration: 4, member: 0 }, n);
    const bound = 4.5 / Math.sqrt(n);
    for (const other of [
      { runSeed: 5, iteration: 4, member: 1 },
      { runSeed: 5, iteration: 5, member: 0 },
      { runSeed: 6, iteration: 4, member: 0 },
    ]) {
      expect(Math.abs(correlation(base, noise(other, n)))).toBeLessThan(bound);
    }
    // Neighbouring elements within a stream are uncorrelated too.
    expect(Math.abs(correlation(base.subarray(0, n - 1), base.subarray(1)))).toBeLessThan(bound);
  });

  it('rejects keys and offsets that are not uint32 / non-negative integers', () => {
    expect(() => noise({ runSeed: -1, iteration: 0, member: 0 }, 1)).toThrow(/runSeed must be a uint32/);
    expect(() => noise({ runSeed: 0, iteration: 1.5, member: 0 }, 1)).toThrow(/iteration must be a uint32/);
    expect(() => noise(key, 1, -3)).toThrow(/offset/);
    expect(() => applyNoise(new Float32Array(4), key, 1, 0, 2, 9)).toThrow(/outside θ/);
  });

  it('the worker-thread pool gives the same bits as one thread', async () => {
    const n = 5 * CHUNK + 77;
    const shared = new Float32Array(new SharedArrayBuffer(n * 4)).fill(0.25);
    const single = new Float32Array(n).fill(0.25);
    const pool = await NoisePool.create(3);
    try {
      await pool.applyNoise(shared, key, -0.3, 1234);
      applyNoise(single, key, -0.3, 1234);
      expect(shared).toEqual(single);
      await expect(pool.applyNoise(new Float32Array(8), key, 1)).rejects.toThrow(/SharedArrayBuffer/);
    } finally {
      await pool.close();
    }
  });
});
