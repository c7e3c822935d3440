/** Thread side of NoisePool: runs one slice of a job on the shared θ and says when it is done. */
import { parentPort } from 'node:worker_threads';
import { applyNoise } from './noise.ts';
import type { PoolJob } from './noise-pool.ts';

const port = parentPort;
if (!port) throw new Error('noise-thread must run as a thread');
port.on('message', (job: PoolJob) => {
  try {
    if (job.op === 'noise') applyNoise(job.theta, job.key, job.c, job.offset, job.start, job.end);
    else for (let i = job.start; i < job.end; i++) job.theta[i] += job.c * job.src[i];
    port.postMessage({});
  } catch (err) {
    port.postMessage({ error: (err as Error).message });
  }
});
port.postMessage({ ready: true });
