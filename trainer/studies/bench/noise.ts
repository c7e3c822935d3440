/** `esopt bench noise`: regenerate-and-apply θ += c·ε vs numpy and vs a plain Float32Array add, side by side. */
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { activeNoiseKernel, applyNoise } from '../../../shared/noise.ts';
import { CENTRE, deviceNoiseKeys, deviceNoiseWords, SCALE } from '../../../shared/device-noise.ts';
import { NoisePool } from '../../../shared/noise-pool.ts';
import type { Log } from './benchmark.ts';
import { machineInfo, median, timeMs } from './measure.ts';
import { int } from './options.ts';

// numpy's fastest comparable path: a fresh Generator's float32 ziggurat plus an in-place add.
const NUMPY = `
import json, sys, time
try:
    import numpy as np
except ImportError:
    print(json.dumps(None)); sys.exit(0)
n, repeats = int(sys.argv[1]), int(sys.argv[2])
theta = np.zeros(n, dtype=np.float32)
c = np.float32(0.01)
times = []
for r in range(repeats + 1):
    t0 = time.perf_counter()
    eps = np.random.default_rng(r).standard_normal(n, dtype=np.float32)
    theta += c * eps
    times.append(time.perf_counter() - t0)
print(json.dumps(times[1:]))
`;

function numpyTimes(n: number, repeats: number): number[] | null {
  const r = spawnSync('python3', ['-c', NUMPY, String(n), String(repeats)], { encoding: 'utf8' });
  if (r.status !== 0 || r.error) return null;
  const parsed = z.array(z.number()).nullable().safeParse(JSON.parse(r.stdout.trim() || 'null'));
  return parsed.success ? parsed.data : null;
}

export const options = z.object({
  log2Size: int(10, 28).default(24),
  repeats: int(1, 100).default(5),
  threads: int(1, 256).default(availableParallelism),
});

export async function run(o: z.output<typeof options>, log: Log) {
  const n = 2 ** o.log2Size;
  const { repeats, threads } = o;
  const theta = new Float32Array(new SharedArrayBuffer(n * 4));
  const src = new Float32Array(new SharedArrayBuffer(n * 4));
  applyNoise(src, { runSeed: 9, iteration: 0, member: 0 }, 1);
  const c = 0.01;
  // One warm-up each so the JIT has compiled both loops before anything is timed.
  const noiseOnce = (r: number) => applyNoise(theta, { runSeed: 1, iteration: r, member: 0 }, c);
  // the run noise a GPU can make (shared/device-noise.ts), which full mode's updates then make on the host
  const deviceOnce = (r: number) => applyNoise(theta, { runSeed: 1, iteration: r, member: 0, definition: 'esopt-device-noise' }, c);
  // the device definition's reference (shared/device-noise.ts: the words as defined, rounds a loop over the
  // table), the form the host kernel `deviceNoiseSum` is held to; n < 2^32, so one key block
  const referenceOnce = (r: number) => {
    const [k0, k1] = deviceNoiseKeys({ runSeed: 1, iteration: r, member: 0 }, 0);
    for (let i = 0; i < n; i++) {
      const [h0, h1] = deviceNoiseWords(i, k0, k1);
      theta[i] += c * Math.fround(((h0 >>> 16) + (h0 & 0xffff) + (h1 >>> 16) + (h1 & 0xffff) - CENTRE) * SCALE);
    }
  };
  const addOnce = () => { for (let i = 0; i < n; i++) theta[i] += c * src[i]; };
  noiseOnce(1000);
  deviceOnce(1000);
  referenceOnce(1000);
  addOnce();
  const ours: number[] = [];
  const device: number[] = [];
  const reference: number[] = [];
  const add: number[] = [];
  log(`single thread: ${repeats} rounds of noise, device noise (kernel and reference) and plain add, interleaved, n = ${n}`);
  for (let r = 0; r < repeats; r++) {
    ours.push(await timeMs(() => noiseOnce(r)));
    device.push(await timeMs(() => deviceOnce(r)));
    reference.push(await timeMs(() => referenceOnce(r)));
    add.push(await timeMs(addOnce));
  }
  log('numpy (python3) …');
  const np = numpyTimes(n, repeats);
  log(`${threads} worker threads …`);
  const pool = await NoisePool.create(threads);
  const oursT: number[] = [];
  const addT: number[] = [];
  try {
    await pool.applyNoise(theta, { runSeed: 1, iteration: 999, member: 0 }, c);
    await pool.axpy(theta, src, c);
    for (let r = 0; r < repeats; r++) {
      oursT.push(await timeMs(() => pool.applyNoise(theta, { runSeed: 1, iteration: r, member: 1 }, c)));
      addT.push(await timeMs(() => pool.axpy(theta, src, c)));
    }
  } finally {
    await pool.close();
  }
  const rate = (ms: number) => n / (ms / 1000);
  const params = rate(median(ours));
  const plain = rate(median(add));
  const numpy = np ? n / median(np) : null;
  const paramsT = rate(median(oursT));
  const plainT = rate(median(addT));
  return {
    n,
    repeats,
    threads,
    kernel: activeNoiseKernel,
    params_per_s: params,
    numpy_params_per_s: numpy,
    plain_add_params_per_s: plain,
    ratio_vs_numpy: numpy ? params / numpy : null,
    ratio_vs_add: params / plain,
    device_noise_params_per_s: rate(median(device)),
    device_noise_ratio_vs_noise: rate(median(device)) / params,
    /** The device definition's reference (deviceNoiseWords, its rounds a loop) applied the same way, and the kernel ÷ it. */
    device_noise_reference_params_per_s: rate(median(reference)),
    device_noise_kernel_vs_reference: median(reference) / median(device),
    params_per_s_threads: paramsT,
    plain_add_params_per_s_threads: plainT,
    ratio_vs_numpy_threads: numpy ? paramsT / numpy : null,
    ratio_vs_add_threads: paramsT / plainT,
    targets: { ratio_vs_numpy: 2.0, ratio_vs_add: 0.5 },
    machine: machineInfo(),
  };
}
