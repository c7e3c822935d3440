/**
 * Version 1 of the device noise definition (shared/device-noise.ts): its reference has zero mean, unit
 * variance, Irwin–Hall(4)'s kurtosis and bound; streams of neighbouring members, iterations, runSeeds, key
 * blocks and neighbouring elements are uncorrelated, and its mixer meets the strict avalanche criterion,
 * bounds the retired draft mixer (scripts/device-noise-draft.ts) fails; its graph
 * (trainer/engine/perturbation/device-noise-graph.ts) gives the reference's bits on the CPU provider and, where Dawn finds a Vulkan adapter, on webgpu with every node on
 * the WebGPU provider (session profiling) and θ in and θ + σε out as gpu-buffer tensors.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { CENTRE, type DeviceNoiseKey, deviceNoiseAt, deviceNoiseKeys, deviceNoiseSum, deviceNoiseWords, perturbedWithDeviceNoise, SCALE } from '../../shared/device-noise.ts';
import { philox4x32 } from '../../shared/philox.ts';
import { draftDeviceNoiseWords } from '../../scripts/device-noise-draft.ts';
import { DeviceTensors } from '../../trainer/engine/generation/device-tensors.ts';
import { encodeModel } from '../../trainer/engine/onnx/proto.ts';
import { deviceNoiseGraph } from '../../trainer/engine/perturbation/device-noise-graph.ts';
import { noAdapter, skipped } from './helpers/webgpu-adapter.ts';
import { differing } from './helpers/float-bits.ts';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const N = 50_000;
const OFFSET = 4_000_000_000; // near the top of uint32: the index arithmetic wraps as the reference's
const theta = Float32Array.from({ length: N }, (_, i) => Math.sin(i * 0.37) * 0.05);
const KEY = { runSeed: 11, iteration: 3, member: 5 };
const keys = deviceNoiseKeys(KEY, 0);
const SIGMA = 0.017;

function feeds(): Record<string, ort.Tensor> {
  return {
    theta: new ort.Tensor('float32', theta, [N]),
    offset: new ort.Tensor('uint32', Uint32Array.of(OFFSET), [1]),
    k0: new ort.Tensor('uint32', Uint32Array.of(keys[0]), [1]),
    k1: new ort.Tensor('uint32', Uint32Array.of(keys[1]), [1]),
    sigma: new ort.Tensor('float32', Float32Array.of(SIGMA), [1]),
  };
}

type Words = (index: number, k0: number, k1: number) => [number, number];

/** ε from the two mixed words, as deviceNoiseAt makes it. */
function epsOf([h0, h1]: [number, number]): number {
  return Math.fround(((h0 >>> 16) + (h0 & 0xffff) + (h1 >>> 16) + (h1 & 0xffff) - CENTRE) * SCALE);
}

const n = 400_000;
/** |correlation| below 4 standard errors of independent streams' (1/√n). */
const CORRELATION_BOUND = 4 / Math.sqrt(n);

/** The sample correlation of ε over n elements of streams a and b, b's indices shifted by `lag`. */
function correlation(words: Words, a: DeviceNoiseKey, b: DeviceNoiseKey, blockA = 0, blockB = 0, lag = 0): number {
  const [a0, a1] = deviceNoiseKeys(a, blockA);
  const [b0, b1] = deviceNoiseKeys(b, blockB);
  let sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (let i = 0; i < n; i++) {
    const x = epsOf(words(i, a0, a1));
    const y = epsOf(words(i + lag, b0, b1));
    sx += x; sy += y; sxx += x * x; syy += y * y; sxy += x * y;
  }
  return (sxy / n - (sx / n) * (sy / n)) / Math.sqrt((sxx / n - (sx / n) ** 2) * (syy / n - (sy / n) ** 2));
}

const base = { runSeed: 1, iteration: 0, member: 0 };
/** The correlations between streams that differ in one coordinate by one, and between neighbouring elements. */
function correlations(words: Words): Record<string, number> {
  return {
    members: correlation(words, base, { ...base, member: 1 }),
    iterations: correlation(words, base, { ...base, iteration: 1 }),
    runSeeds: correlation(words, base, { ...base, runSeed: 2 }),
    blocks: correlation(words, base, base, 0, 1),
    neighbours: correlation(words, base, base, 0, 0, 1),
  };
}

/**
 * The strict avalanche criterion: for each bit of the index, k0 and k1 and each of the 64 bits of (h0, h1),
 * the z-score of how often flipping the input bit flips the output bit, over `samples` random inputs
 * (Philox words, seeded). Returns the largest |z| and the mean z² (1 for a mixer that meets the criterion).
 */
function avalanche(words: Words, samples: number): { maxZ: number; meanZ2: number } {
  const r = new Uint32Array(4);
  let maxZ = 0, sumZ2 = 0, cells = 0;
  for (let input = 0; input < 3; input++) {
    for (let bit = 0; bit < 32; bit++) {
      const flips = new Float64Array(64);
      for (let s = 0; s < samples; s++) {
        philox4x32(s, bit, input, 0xa7a1, 0x5eed, 0, r);
        const a: [number, number, number] = [r[0], r[1], r[2]];
        const b: [number, number, number] = [r[0], r[1], r[2]];
        b[input] = (b[input] ^ (1 << bit)) >>> 0;
        const [x0, x1] = words(...a);
        const [y0, y1] = words(...b);
        const d0 = (x0 ^ y0) >>> 0, d1 = (x1 ^ y1) >>> 0;
        for (let o = 0; o < 32; o++) {
          flips[o] += (d0 >>> o) & 1;
          flips[32 + o] += (d1 >>> o) & 1;
        }
      }
      for (const f of flips) {
        const z = (f / samples - 0.5) / Math.sqrt(0.25 / samples);
        maxZ = Math.max(maxZ, Math.abs(z));
        sumZ2 += z * z;
        cells++;
      }
    }
  }
  return { maxZ, meanZ2: sumZ2 / cells };
}
// 6144 cells: the largest |z| of independent standard normals exceeds 5 with probability 0.4 %;
// the mean z² has standard deviation √(2/6144) ≈ 0.018 around 1
const AVALANCHE = { samples: 4000, maxZ: 5, meanZ2: 1.1 };

describe('the device noise definition', () => {
  it('has mean 0, variance 1, Irwin–Hall(4)’s kurtosis 2.7, and |ε| ≤ 2√3', () => {
    const [k0, k1] = deviceNoiseKeys(base, 0);
    let sum = 0, sq = 0, fourth = 0, max = 0;
    for (let i = 0; i < n; i++) {
      const x = deviceNoiseAt(i, k0, k1);
      if (i < 1000) expect(x).toBe(epsOf(deviceNoiseWords(i, k0, k1)));
      sum += x;
      sq += x * x;
      fourth += x ** 4;
      max = Math.max(max, Math.abs(x));
    }
    // standard errors: the mean's 1/√n, the variance's √(2.7 − 1)/√n, the fourth moment's about 7/√n
    expect(Math.abs(sum / n)).toBeLessThan(4 / Math.sqrt(n));
    expect(Math.abs(sq / n - 1)).toBeLessThan(4 * Math.sqrt(1.7 / n));
    expect(Math.abs(fourth / n - 2.7)).toBeLessThan(28 / Math.sqrt(n));
    expect(max).toBeLessThanOrEqual(2 * Math.sqrt(3));
    expect(deviceNoiseKeys(base, 0)).not.toEqual(deviceNoiseKeys({ ...base, iteration: 1 }, 0));
    expect(deviceNoiseKeys(base, 0)).not.toEqual(deviceNoiseKeys(base, 1));
  });

  it(`streams of neighbouring members, iterations, runSeeds and key blocks, and neighbouring elements, correlate by under 4/√n`, () => {
    const r = correlations(deviceNoiseWords);
    for (const [pair, c] of Object.entries(r)) expect(Math.abs(c), pair).toBeLessThan(CORRELATION_BOUND);
  });

  it('flipping one bit of the index, k0 or k1 flips each bit of both mixed words with probability ½', () => {
    const a = avalanche(deviceNoiseWords, AVALANCHE.samples);
    expect(a.maxZ).toBeLessThan(AVALANCHE.maxZ);
    expect(a.meanZ2).toBeLessThan(AVALANCHE.meanZ2);
  });

  it('the draft mixer it replaced fails these bounds: the checks can fail', () => {
    const r = correlations(draftDeviceNoiseWords);
    expect(Math.abs(r.members)).toBeGreaterThan(CORRELATION_BOUND);
    expect(Math.abs(r.iterations)).toBeGreaterThan(CORRELATION_BOUND);
    expect(Math.abs(r.neighbours)).toBeGreaterThan(CORRELATION_BOUND);
    const a = avalanche(draftDeviceNoiseWords, AVALANCHE.samples);
    expect(a.maxZ).toBeGreaterThan(AVALANCHE.maxZ);
    expect(a.meanZ2).toBeGreaterThan(AVALANCHE.meanZ2);
  });

  it('the host kernel’s int32 sum equals the sum of the mixed words’ halves, at random and at the edges of uint32', () => {
    const halves = (i: number, k0: number, k1: number) => {
      const [h0, h1] = deviceNoiseWords(i, k0, k1);
      return (h0 >>> 16) + (h0 & 0xffff) + (h1 >>> 16) + (h1 & 0xffff);
    };
    const words = new Uint32Array(3);
    const edges = [0, 1, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff];
    let checked = 0;
    for (let t = 0; t < 200_000; t++) {
      philox4x32(t, 0, 0, 0x5eed, 7, 0, words);
      const [i, k0, k1] = t < edges.length ** 3 ? [edges[t % 6], edges[Math.floor(t / 6) % 6], edges[Math.floor(t / 36)]] : words;
      if (deviceNoiseSum(i, k0, k1) !== halves(i, k0, k1)) throw new Error(`deviceNoiseSum(${i}, ${k0}, ${k1}) = ${deviceNoiseSum(i, k0, k1)}, the words give ${halves(i, k0, k1)}`);
      checked++;
    }
    expect(checked).toBe(200_000);
    expect(deviceNoiseAt(5, 6, 7)).toBe(Math.fround((halves(5, 6, 7) - CENTRE) * SCALE));
  });

  it('its graph gives the reference’s bits on the CPU provider', async () => {
    const s = await ort.InferenceSession.create(encodeModel(deviceNoiseGraph()), { executionProviders: ['cpu'] });
    const out = await s.run(feeds());
    const want = perturbedWithDeviceNoise(theta, OFFSET, KEY, SIGMA);
    expect(differing(out.perturbed.data as Float32Array, want)).toBe(0);
    expect(differing(want, theta)).toBeGreaterThan(N * 0.99); // the noise did change θ
    // each node is a pass over a θ-sized tensor on the device: the mixer must not cost more than the draft's 59
    expect(deviceNoiseGraph().graph.node.length).toBeLessThanOrEqual(59);
    await s.release();
  });

  it.skipIf(noAdapter !== null)(`its graph runs wholly on the WebGPU provider, θ in and θ + σε out on the device, the reference’s bits${skipped}`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'esopt-device-noise-'));
    dirs.push(dir);
    const graph = encodeModel(deviceNoiseGraph());
    const s = await ort.InferenceSession.create(graph, { executionProviders: ['webgpu'], preferredOutputLocation: { perturbed: 'gpu-buffer' }, enableProfiling: true, profileFilePrefix: join(dir, 'profile') });
    const device = await DeviceTensors.create({ layers: 0 });
    try {
      const onDevice = await device.upload({ theta: feeds().theta });
      expect(onDevice.theta.location).toBe('gpu-buffer');
      const out = await s.run({ ...feeds(), ...onDevice });
      expect(out.perturbed.location).toBe('gpu-buffer');
      device.adopt([out.perturbed]);
      s.endProfiling();
      // to the host through a session (getData on a gpu-buffer tensor aborts the process in onnxruntime-node 1.30)
      const back = await ort.InferenceSession.create(graph, { executionProviders: ['webgpu'] });
      const zero = { k0: new ort.Tensor('uint32', Uint32Array.of(0), [1]), k1: new ort.Tensor('uint32', Uint32Array.of(0), [1]), sigma: new ort.Tensor('float32', Float32Array.of(0), [1]) };
      const host = await back.run({ theta: out.perturbed, offset: feeds().offset, ...zero });
      await back.release();
      expect(differing(host.perturbed.data as Float32Array, perturbedWithDeviceNoise(theta, OFFSET, KEY, SIGMA))).toBe(0);
      const events = JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]), 'utf8')) as Array<{ cat: string; args?: { op_name?: string; provider?: string; output_size?: string } }>;
      const nodes = events.filter((e) => e.cat === 'Node' && e.args?.provider).map((e) => e.args!);
      // every θ-sized tensor is made on the device; the CPU only folds the Range's scalar bounds, and nothing is copied
      const placed = new Set(nodes.filter((a) => Number(a.output_size) >= 4 * N).map((a) => `${a.op_name} on ${a.provider}`));
      expect([...placed].sort()).toEqual(['Add', 'Cast', 'Div', 'Mul', 'Range', 'Sub'].map((op) => `${op} on WebGpuExecutionProvider`));
      expect(nodes.filter((a) => a.provider !== 'WebGpuExecutionProvider').map((a) => Number(a.output_size))).toSatisfy((sizes: number[]) => sizes.every((b) => b <= 8));
      expect(nodes.filter((a) => /Memcpy/.test(a.op_name ?? ''))).toEqual([]);
      device.dispose([out.perturbed, ...Object.values(onDevice)]);
      expect(device.live).toBe(0);
    } finally {
      await device.release();
      await s.release();
    }
  }, 30_000);
});
