/**
 * Bytes that cross between host and device, measured where they happen: onnxruntime's profile of a
 * session's Memcpy nodes (trainer/engine/onnx/session-profile.ts) and the host tensors the engine's own
 * device sessions take and give (trainer/engine/generation/crossings.ts, device-tensors.ts).
 *
 * The probe graph: uint32 x → Mul (a device kernel) → BitShift (the WebGPU provider has none: it runs on
 * the CPU) → Mul (device) → y. On webgpu onnxruntime copies Mul's output down for BitShift and BitShift's up
 * for the last Mul, N × 4 B each way a run; on the CPU provider nothing is copied. The fixture
 * fixtures/memcpy-profile-webgpu-lavapipe.json is this graph's profile from a real run (N = 1,000, 3 runs,
 * onnxruntime-node 1.30.0's WebGPU provider on Mesa 25.0.7's lavapipe, 2026-12-06), so the parser is held
 * to a real profile where no Vulkan adapter is found (CI).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { countedRun, noCrossings } from '../../trainer/engine/generation/crossings.ts';
import { DeviceTensors } from '../../trainer/engine/generation/device-tensors.ts';
import { GraphBuilder } from '../../trainer/engine/onnx/graph-builder.ts';
import { DataType, encodeModel } from '../../trainer/engine/onnx/proto.ts';
import { memcpyInDir, memcpyOfProfile, profiling } from '../../trainer/engine/onnx/session-profile.ts';
import { noAdapter, skipped } from './helpers/webgpu-adapter.ts';

const N = 1000;
const RUNS = 3;

function probeGraph() {
  const g = new GraphBuilder();
  g.input('x', DataType.UINT32, [N]);
  g.input('s', DataType.UINT32, [N]);
  const b = g.op1('BitShift', [g.op1('Mul', ['x', 'x']), 's'], { direction: 'RIGHT' });
  g.nameOutput(g.op1('Mul', [b, 'x']), 'y');
  g.output('y', DataType.UINT32, [N]);
  return encodeModel(g.model('memcpy-probe'));
}

const feeds = () => ({ x: new ort.Tensor('uint32', new Uint32Array(N).fill(3), [N]), s: new ort.Tensor('uint32', new Uint32Array(N).fill(1), [N]) });

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The probe's Memcpy bytes on `provider`, from the profile its session writes when released. */
async function profiled(provider: 'cpu' | 'webgpu') {
  const dir = mkdtempSync(join(tmpdir(), 'esopt-profile-test-'));
  dirs.push(dir);
  const s = await ort.InferenceSession.create(probeGraph(), { executionProviders: [provider], ...profiling(dir) });
  let y: Uint32Array | null = null;
  for (let r = 0; r < RUNS; r++) y = (await s.run(feeds())).y.data as Uint32Array;
  await s.release();
  expect(y![0]).toBe(((3 * 3) >>> 1) * 3); // the graph ran: (x·x >> 1)·x
  expect(readdirSync(dir)).toHaveLength(1);
  return memcpyInDir(dir);
}

describe('Memcpy bytes from onnxruntime session profiles', () => {
  it('a real webgpu profile (the committed fixture): each way N × 4 B a run, in RUNS runs', () => {
    const events = JSON.parse(readFileSync(new URL('./fixtures/memcpy-profile-webgpu-lavapipe.json', import.meta.url), 'utf8'));
    expect(memcpyOfProfile(events)).toEqual({ host_to_device_bytes: RUNS * N * 4, host_to_device_runs: RUNS, device_to_host_bytes: RUNS * N * 4, device_to_host_runs: RUNS, profiles: 1, node_runs: RUNS * 5 });
  });

  it('on the CPU provider nothing is copied: a measured zero, the profile read', async () => {
    expect(await profiled('cpu')).toEqual({ host_to_device_bytes: 0, host_to_device_runs: 0, device_to_host_bytes: 0, device_to_host_runs: 0, profiles: 1, node_runs: RUNS * 3 });
  });

  it.skipIf(noAdapter !== null)(`on webgpu, profiled now: BitShift's input down and its output up, N × 4 B each way a run${skipped}`, async () => {
    expect(await profiled('webgpu')).toMatchObject({ host_to_device_bytes: RUNS * N * 4, host_to_device_runs: RUNS, device_to_host_bytes: RUNS * N * 4, device_to_host_runs: RUNS, profiles: 1 });
  }, 30_000);

  it('refuses what is not a profile, and a Memcpy event without its size', () => {
    expect(() => memcpyOfProfile({})).toThrow(/JSON array/);
    expect(() => memcpyOfProfile([{ cat: 'Node', name: 'Memcpy_kernel_time', args: { op_name: 'MemcpyToHost' } }])).toThrow(/output_size/);
    // fence events and other categories are not node runs
    expect(memcpyOfProfile([{ cat: 'Node', name: 'Memcpy_fence_before', args: { op_name: 'MemcpyToHost', output_size: '8' } }, { cat: 'Session', name: 'model_run' }])).toMatchObject({ device_to_host_bytes: 0, node_runs: 0 });
  });
});

describe('host ↔ device bytes counted at the runs the code makes', () => {
  it('countedRun adds the host feeds going in and the host outputs coming back', async () => {
    const s = await ort.InferenceSession.create(probeGraph(), { executionProviders: ['cpu'] });
    const c = noCrossings();
    await countedRun(s, feeds(), c);
    await countedRun(s, feeds(), c);
    await s.release();
    expect(c).toEqual({ hostToDevice: 2 * 2 * N * 4, deviceToHost: 2 * N * 4, runs: 2 });
  });

  it.skipIf(noAdapter !== null)(`DeviceTensors: an upload counts its host bytes up and a gpu-buffer output nothing down; a download counts the rows it brings${skipped}`, async () => {
    const device = await DeviceTensors.create({ layers: 1 });
    try {
      const kv = (v: number) => new ort.Tensor('float32', new Float32Array(3 * 2 * 5 * 4).fill(v), [3, 2, 5, 4]);
      const up = await device.upload({ 'past_key_values.0.key': kv(1), 'past_key_values.0.value': kv(2) });
      expect(up['past_key_values.0.key'].location).toBe('gpu-buffer');
      expect(device.crossed).toEqual({ hostToDevice: 2 * 120 * 4, deviceToHost: 0, runs: 1 });
      // a gather on the device: only the row indices (int64) go up
      device.dispose(Object.values(await device.gather(up, [2, 0])));
      expect(device.crossed).toEqual({ hostToDevice: 2 * 120 * 4 + 2 * 8, deviceToHost: 0, runs: 2 });
      // a download: the indices up, the chosen row's keys and values (2 heads × 5 × 4 floats each) down
      const host = await device.download(up, [1]);
      expect(host['past_key_values.0.value'].data).toEqual(new Float32Array(40).fill(2));
      expect(device.crossed).toEqual({ hostToDevice: 2 * 120 * 4 + 2 * 8 + 8, deviceToHost: 2 * 40 * 4, runs: 3 });
      device.dispose(Object.values(up));
    } finally {
      await device.release();
    }
  }, 30_000);
});
