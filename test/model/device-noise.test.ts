/**
 * The draft device noise definition (shared/device-noise.ts): its reference has unit variance, zero mean,
 * its bound, and members that correlate weakly (the draft's known weakness, bounded here); its graph (trainer/perturbation/device-noise-graph.ts) gives the
 * reference's bits on the CPU provider and, where Dawn finds a Vulkan adapter, on webgpu with every node on
 * the WebGPU provider (session profiling) and θ in and θ + σε out as gpu-buffer tensors.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { deviceNoiseAt, deviceNoiseKeys, perturbedWithDeviceNoise } from '../../shared/device-noise.ts';
import { DeviceTensors } from '../../trainer/generation/device-tensors.ts';
import { buildPreset } from '../../trainer/model/open-model.ts';
import { sessionOptionsFor } from '../../trainer/model/sessions.ts';
import { encodeModel } from '../../trainer/onnx/proto.ts';
import { deviceNoiseGraph } from '../../trainer/perturbation/device-noise-graph.ts';

const noAdapter = await ort.InferenceSession.create(encodeModel(buildPreset('tiny', 0).graph), sessionOptionsFor({ executionProvider: 'webgpu' }))
  .then(async (s) => (await s.release(), null))
  .catch((err: Error) => {
    if (/Failed to get a WebGPU adapter|No supported adapters/.test(err.message)) return err.message.slice(err.message.indexOf('Failed to get'));
    throw err;
  });
const skipped = noAdapter ? ` — SKIPPED, no Vulkan adapter here (${noAdapter})` : '';

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

/** Elements where `got` and `want` differ in any bit. */
function differing(got: Float32Array, want: Float32Array): number {
  const a = new Uint32Array(got.buffer, got.byteOffset, got.length);
  const b = new Uint32Array(want.buffer, want.byteOffset, want.length);
  let n = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) n++;
  return n;
}

describe('the device noise definition', () => {
  it('has mean 0, variance 1, |ε| ≤ 2√3, and members that correlate by less than 0.03 (a draft: a good mixer would give ~0.002)', () => {
    const n = 400_000;
    const [a0, a1] = deviceNoiseKeys({ runSeed: 1, iteration: 0, member: 0 }, 0);
    const [b0, b1] = deviceNoiseKeys({ runSeed: 1, iteration: 0, member: 1 }, 0);
    let sum = 0, sq = 0, cross = 0, max = 0, fourth = 0;
    for (let i = 0; i < n; i++) {
      const x = deviceNoiseAt(i, a0, a1);
      const y = deviceNoiseAt(i, b0, b1);
      sum += x;
      sq += x * x;
      fourth += x ** 4;
      cross += x * y;
      max = Math.max(max, Math.abs(x));
    }
    expect(Math.abs(sum / n)).toBeLessThan(0.005);
    expect(Math.abs(sq / n - 1)).toBeLessThan(0.01);
    expect(Math.abs(cross / n)).toBeLessThan(0.03);
    expect(max).toBeLessThanOrEqual(2 * Math.sqrt(3));
    // Irwin–Hall(4)'s kurtosis is 2.7 (a Gaussian's 3)
    expect(fourth / n).toBeGreaterThan(2.6);
    expect(fourth / n).toBeLessThan(2.8);
    expect(deviceNoiseKeys({ runSeed: 1, iteration: 0, member: 0 }, 0)).not.toEqual(deviceNoiseKeys({ runSeed: 1, iteration: 1, member: 0 }, 0));
    expect(deviceNoiseKeys({ runSeed: 1, iteration: 0, member: 0 }, 0)).not.toEqual(deviceNoiseKeys({ runSeed: 1, iteration: 0, member: 0 }, 1));
  });

  it('its graph gives the reference’s bits on the CPU provider', async () => {
    const s = await ort.InferenceSession.create(encodeModel(deviceNoiseGraph()), { executionProviders: ['cpu'] });
    const out = await s.run(feeds());
    const want = perturbedWithDeviceNoise(theta, OFFSET, KEY, SIGMA);
    expect(differing(out.perturbed.data as Float32Array, want)).toBe(0);
    expect(differing(want, theta)).toBeGreaterThan(N * 0.99); // the noise did change θ
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
