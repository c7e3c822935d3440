/** The messages between PerturbationPool and its worker threads (the same thread-local data both ways). */
import type { NoiseKey } from '../../shared/noise.ts';
import type { Perturbation } from './exact-perturbation.ts';

export interface PerturbationJob {
  op: 'perturb' | 'restore' | 'switch';
  key: NoiseKey;
  /** perturb, switch: the new coefficient. */
  c: number;
  /** restore, switch: the coefficient θ is perturbed with now, and its fix-ups (one entry per tensor). */
  fromC: number;
  fixups: Perturbation['fixups'];
  /** The tensors this worker handles (buffers transferred) and where each sits in ε's stream. */
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

/** The buffers a message moves rather than copies: θ's tensors and the fix-up lists, each buffer once. */
export function transferList(data: readonly Float32Array[], fixups: Perturbation['fixups'] | null): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>();
  for (const d of data) buffers.add(d.buffer as ArrayBuffer);
  for (const f of fixups ?? []) buffers.add(f.index.buffer as ArrayBuffer).add(f.value.buffer as ArrayBuffer);
  return [...buffers];
}
