/**
 * Thread side of PerturbationPool: receives some of θ's tensors (their buffers transferred, not copied),
 * runs its job on them with this thread's own noise kernel, and transfers them back with the new
 * fix-ups. Whatever happens, the buffers go back: they are the only copy of θ.
 */
import { parentPort } from 'node:worker_threads';
import { runJob, transferList, type PerturbationJob, type PerturbationReply } from './perturbation-job.ts';

const port = parentPort;
if (!port) throw new Error('perturbation-thread must run as a thread');

port.on('message', (job: PerturbationJob) => {
  let reply: PerturbationReply;
  try {
    reply = { data: job.data, fixups: runJob(job) };
  } catch (err) {
    reply = { data: job.data, fixups: null, error: (err as Error).message };
  }
  port.postMessage(reply, transferList(reply.data, reply.fixups));
});
port.postMessage({ ready: true });
