/**
 * How much pure compute the machine gives N threads at once, right now: the control beside a scaling
 * figure. On a shared VM the host may run two vCPUs on less than two cores for seconds at a time
 * (docs/BENCHMARKS.md), and no steal time shows in /proc/stat; a pool's scaling measured in such a
 * moment says more about the host than the pool.
 *
 * N worker threads wait on one shared flag, then each runs the same arithmetic loop until a shared
 * deadline; work per second with N threads ÷ (N × one thread's) is the machine's own scaling.
 */
import { Worker } from 'node:worker_threads';

// Plain JavaScript, no imports: a worker evaluates it from source. It counts loops of a fixed block
// of floating-point work until the deadline the parent writes into the shared array.
const SPIN = `
const { parentPort, workerData } = require('node:worker_threads');
const flag = new Int32Array(workerData, 0, 1);
const deadline = new Float64Array(workerData, 8, 1);
Atomics.wait(flag, 0, 0);
let blocks = 0, x = 0;
while (Date.now() < deadline[0]) {
  for (let i = 0; i < 20000; i++) x += Math.sqrt(i + blocks);
  blocks++;
}
parentPort.postMessage({ blocks, x });
`;

/** Blocks of work per second done by `threads` threads spinning together for about `ms` milliseconds. */
export async function spinRate(threads: number, ms: number): Promise<number> {
  const shared = new SharedArrayBuffer(16);
  const workers = Array.from({ length: threads }, () => new Worker(SPIN, { eval: true, workerData: shared }));
  try {
    const results = workers.map(
      (w) =>
        new Promise<number>((resolve, reject) => {
          w.once('message', (m: { blocks: number }) => resolve(m.blocks));
          w.once('error', reject);
        }),
    );
    await Promise.all(workers.map((w) => new Promise((resolve) => w.once('online', resolve))));
    new Float64Array(shared, 8, 1)[0] = Date.now() + ms;
    const flag = new Int32Array(shared, 0, 1);
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
    const blocks = await Promise.all(results);
    // The window is the deadline's: every thread stops at the same wall-clock moment.
    return blocks.reduce((a, b) => a + b, 0) / (ms / 1000);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}
