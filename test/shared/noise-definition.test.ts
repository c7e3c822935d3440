/**
 * A run's noise definition (shared/noise-definition.ts) at the entry points that make ε: a NoiseKey naming
 * 'esopt-device-noise' makes shared/device-noise.ts's stream through applyNoise, applyNoiseWith (either
 * kernel name), fillNoise, the dense update and full mode's exact perturb/switch/restore (the wasm kernel's
 * paths fall back to the JavaScript rule, with the same bits and an exact restore), and a RunConfig refuses
 * the device definition outside full mode at the field `noise`.
 */
import { describe, expect, it } from 'vitest';
import { applyDeviceNoise } from '../../shared/device-noise.ts';
import { applyDenseUpdate } from '../../shared/es.ts';
import { applyNoise, applyNoiseWith, fillNoise, noise, type NoiseKey } from '../../shared/noise.ts';
import { RunConfig } from '../../shared/schemas/index.ts';
import { perturbWith, restore, switchPerturbationWith } from '../../trainer/engine/perturbation/exact-perturbation.ts';

const BASE = { runSeed: 7, iteration: 2, member: 3 };
const DEVICE: NoiseKey = { ...BASE, definition: 'esopt-device-noise' };

describe('NoiseKey.definition', () => {
  it('makes the device stream at every entry point, and the default stream without it', () => {
    const want = new Float64Array(5000);
    applyDeviceNoise(want, BASE, 1, 123_456, 0, want.length);
    const filled = new Float64Array(5000);
    fillNoise(filled, DEVICE, 123_456);
    expect(filled).toEqual(want);
    for (const kernel of ['js', 'wasm'] as const) {
      const out = new Float64Array(5000);
      applyNoiseWith(kernel, out, DEVICE, 1, 123_456, 0, out.length);
      expect(out).toEqual(want);
    }
    const theta = new Float32Array(5000);
    applyNoise(theta, DEVICE, 0.5, 123_456);
    expect(theta).toEqual(Float32Array.from(want, (e) => 0.5 * e));
    // the default stream is another one
    expect(noise(BASE, 5000, 123_456)).not.toEqual(Float32Array.from(want));
  });

  it('refuses a definition it does not know', () => {
    expect(() => noise({ ...BASE, definition: 'esopt-other' as never }, 4)).toThrow(/noise key definition must be absent or 'esopt-device-noise', got esopt-other/);
  });

  it('the dense update draws each coefficient\'s ε from the device stream', () => {
    const theta = Float32Array.from({ length: 9000 }, (_, i) => Math.cos(i) * 0.1);
    const coefs = [{ noiseIndex: 1, coef: 0.02 }, { noiseIndex: 4, coef: -0.03 }];
    const acc = new Float64Array(theta.length);
    for (const { noiseIndex, coef } of coefs) applyDeviceNoise(acc, { runSeed: 7, iteration: 2, member: noiseIndex }, coef, 50, 0, acc.length);
    const want = Float32Array.from(theta, (t, i) => t * (1 - 0.01) + acc[i]);
    const seg = [{ name: 'w', data: theta.slice(), offset: 50 }];
    applyDenseUpdate(seg, 7, 2, coefs, { decay: 0.01, noise: 'esopt-device-noise' });
    expect(seg[0].data).toEqual(want);
    const plain = [{ name: 'w', data: theta.slice(), offset: 50 }];
    applyDenseUpdate(plain, 7, 2, coefs, { decay: 0.01 });
    expect(plain[0].data).not.toEqual(want);
  });

  it('full mode\'s exact perturb, switch and restore on a device key: the same bits on both kernels, θ back exactly', () => {
    const theta0 = Float32Array.from({ length: 20_000 }, (_, i) => Math.sin(i * 0.7) * (i % 97 === 0 ? 1e-7 : 0.05));
    const runs = (['js', 'wasm'] as const).map((kernel) => {
      const segments = [{ name: 'a', data: theta0.slice(0, 7000), offset: 0 }, { name: 'b', data: theta0.slice(7000), offset: 7000 }];
      const p = perturbWith(kernel, segments, DEVICE, 0.03);
      const plus = segments.map((s) => s.data.slice());
      const q = switchPerturbationWith(kernel, segments, p, -0.03);
      const minus = segments.map((s) => s.data.slice());
      restore(segments, q);
      return { plus, minus, back: segments.map((s) => s.data) };
    });
    expect(runs[1].plus).toEqual(runs[0].plus);
    expect(runs[1].minus).toEqual(runs[0].minus);
    for (const r of runs) expect(Float32Array.from([...r.back[0], ...r.back[1]])).toEqual(theta0);
    // θ + σε of the device stream, within the exact rule's one ulp
    const eps = new Float64Array(theta0.length);
    applyDeviceNoise(eps, BASE, 1, 0, 0, eps.length);
    const plus = Float32Array.from([...runs[0].plus[0], ...runs[0].plus[1]]);
    const far = plus.findIndex((t, i) => {
      const x = theta0[i] + 0.03 * eps[i];
      return Math.abs(t - x) > Math.abs(x) * 2 ** -22 + 2 ** -149; // rounding plus at most one ulp
    });
    expect(far).toBe(-1);
  });
});

describe('RunConfig noise', () => {
  const base = {
    environment: { name: 'sudoku', options: {} },
    model: { preset: 'tiny', seed: 0 },
    es: { population: 4, sigma: 0.01, alpha: 0.01 },
    iterations: 1,
  };

  it('is absent by default and takes the device definition in full mode', () => {
    expect('noise' in RunConfig.parse(base)).toBe(false);
    expect(RunConfig.parse({ ...base, noise: 'esopt-device-noise' }).noise).toBe('esopt-device-noise');
  });

  it('refuses the device definition in low-rank and LoRA mode, and an unknown name, at `noise`', () => {
    for (const extra of [{ mode: 'lowrank' }, { mode: 'lora', lora: { rank: 2, alpha: 4, targets: 'all-linear' } }]) {
      const r = RunConfig.safeParse({ ...base, ...extra, noise: 'esopt-device-noise' });
      expect(r.success).toBe(false);
      expect(r.error!.issues.map((i) => [i.path.join('.'), i.message])).toEqual([['noise', expect.stringMatching(/"esopt-device-noise" is for mode "full" \(this run's mode is "(lowrank|lora)"\)/)]]);
    }
    expect(RunConfig.safeParse({ ...base, mode: 'lowrank', noise: 'esopt-noise' }).success).toBe(true);
    const bad = RunConfig.safeParse({ ...base, noise: 'gaussian' });
    expect(bad.error!.issues[0].path).toEqual(['noise']);
  });
});
