/**
 * One share of a full-mode perturb, restore or switch, as PerturbationPool hands it to a thread (this one
 * or another thread): the message both ways, the one function that runs it on either side, and which buffers a
 * message moves rather than copies.
 */
import type { ParameterSegment } from '../../../shared/es.ts';
import type { NoiseKey } from '../../../shared/noise.ts';
import { perturb, restore, switchPerturbation, type Perturbation } from './exact-perturbation.ts';

export interface PerturbationJob {
  op: 'perturb' | 'restore' | 'switch';
  key: NoiseKey;
  /** perturb, switch: the new coefficient. */
  c: number;
  /** restore, switch: the coefficient θ is perturbed with now, and its fix-ups (one entry per tensor). */
  fromC: number;
  fixups: Perturbation['fixups'];
  /** The tensors this thread handles (buffers transferred to another thread) and where each sits in ε's stream. */
  data: Float32Array[];
  offsets: number[];
}

export interface PerturbationReply {
  /** The same tensors, transferred back. */
  data: Float32Array[];
  /** perturb, switch: the new fix-ups per tensor. */
  fixups: Perturbation['fixups'] | null;
  error?: string;
}

/** Run a job on its tensors in place with this thread's noise kernel: the new fix-ups, or null for restore. */
export function runJob(job: PerturbationJob): Perturbation['fixups'] | null {
  const segments: ParameterSegment[] = job.data.map((data, k) => ({ name: '', data, offset: job.offsets[k] }));
  const from: Perturbation = { key: job.key, c: job.fromC, fixups: job.fixups, fixupCount: 0 };
  if (job.op === 'perturb') return perturb(segments, job.key, job.c).fixups;
  if (job.op === 'switch') return switchPerturbation(segments, from, job.c).fixups;
  restore(segments, from);
  return null;
}

/** The buffers a message moves rather than copies: θ's tensors and the fix-up lists, each buffer once. */
export function transferList(data: readonly Float32Array[], fixups: Perturbation['fixups'] | null): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>();
  for (const d of data) buffers.add(d.buffer as ArrayBuffer);
  for (const f of fixups ?? []) buffers.add(f.bytes.buffer as ArrayBuffer);
  return [...buffers];
}
