/**
 * Worker side of PerturbationPool: receives some of θ's tensors (their buffers transferred, not copied),
 * runs the exact perturb, restore or switch on them with this thread's own noise kernel, and transfers
 * them back with the new fix-ups. Whatever happens, the buffers go back: they are the only copy of θ.
 */
import { parentPort } from 'node:worker_threads';
import type { ParameterSegment } from '../../shared/es.ts';
import { perturb, restore, switchPerturbation, type Perturbation } from './exact-perturbation.ts';
import { transferList, type PerturbationJob, type PerturbationReply } from './perturbation-protocol.ts';

const port = parentPort;
if (!port) throw new Error('perturbation-worker must run as a worker thread');

function run(job: PerturbationJob, segments: ParameterSegment[]): Perturbation['fixups'] | null {
  const from = (): Perturbation => ({ key: job.key, c: job.fromC, fixups: job.fixups, fixupCount: 0 });
  if (job.op === 'perturb') return perturb(segments, job.key, job.c).fixups;
  if (job.op === 'switch') return switchPerturbation(segments, from(), job.c).fixups;
  restore(segments, from());
  return null;
}

port.on('message', (job: PerturbationJob) => {
  const segments = job.data.map((data, k) => ({ name: '', data, offset: job.offsets[k] }));
  let reply: PerturbationReply;
  try {
    reply = { data: job.data, fixups: run(job, segments) };
  } catch (err) {
    reply = { data: job.data, fixups: null, error: (err as Error).message };
  }
  port.postMessage(reply, transferList(reply.data, reply.fixups));
});
port.postMessage({ ready: true });
