/**
 * Full mode's walk over the members of one engine call, and its update, shared by both full-mode strategies: rows are
 * grouped by member, θ itself first, then members by noise index with + before −, so antithetic twins run
 * back to back and θ goes from one to the other in one pass over ε; θ is exactly restored at the end,
 * also when a visit throws.
 */
import { applyDenseUpdate, type ParameterSegment } from '../../../shared/es.ts';
import type { Member } from '../../../shared/schemas/index.ts';
import type { Targets } from '../../../shared/targets.ts';
import type { NoiseKey } from '../../../shared/noise.ts';
import type { EngineUpdate, Population } from '../engine.ts';
import type { Perturbation } from '../perturbation/exact-perturbation.ts';
import type { PerturbationPool } from '../perturbation/perturbation-pool.ts';
import type { LoadedModel } from '../model/model-dir.ts';
import type { TargetTensors } from '../model/target-tensors.ts';

/** θ as full mode holds it: the model's tensors, their segments, the pool that perturbs them, and which are targets. */
export interface FullModeTheta {
  model: LoadedModel;
  segments: ParameterSegment[];
  switcher: PerturbationPool;
  targets: TargetTensors;
}

/**
 * The segments `targets` selects: the same objects as θ's (the switcher re-points their views), each at its
 * own stream offset, so a targeted tensor's ε is what it is under `all`. A worker is lent whole buffers, so a
 * buffer shared by a targeted and an untargeted tensor would detach the untargeted one's view: refused.
 */
function targeted(t: FullModeTheta, targets: Targets | undefined): ParameterSegment[] {
  const chosen = t.targets.select(targets);
  if (!chosen) return t.segments;
  const segments = t.segments.filter((_, i) => chosen.has(i));
  if (t.switcher.threads > 1) {
    const buffers = new Set(segments.map((s) => s.data.buffer));
    const shared = t.segments.find((s, i) => !chosen.has(i) && buffers.has(s.data.buffer));
    if (shared) throw new Error(`targets: untargeted tensor ${shared.name} shares its memory with a targeted one, so θ cannot be perturbed on ${t.switcher.threads} threads; use one switch thread`);
  }
  return segments;
}

/** Points the model's tensors, and its graph's initializer bytes (what encoding the graph reads), at `views`. */
export function pointWeightsAt(model: LoadedModel, views: readonly Float32Array[]): void {
  const byName = new Map(model.graph.graph.initializer.map((t) => [t.name, t]));
  model.weights.forEach((w, i) => {
    const data = views[i];
    if (w.data === data) return;
    w.data = data;
    const init = byName.get(w.name);
    // an fp16 initializer is not a view of its fp32 master (half-theta.ts writes it when a session is made)
    if (init && !model.half?.names.has(w.name)) init.rawData = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  });
}

/**
 * After the switcher lent θ's tensors to its threads, the segments are new views onto the same memory and
 * the old ones are detached: point the model's tensors and initializer bytes at the new views.
 */
function relink(t: FullModeTheta): void {
  if (t.segments.every((s, i) => t.model.weights[i].data === s.data)) return; // one thread: nothing was lent
  pointWeightsAt(t.model, t.segments.map((s) => s.data));
}

/** The noise key of a population's member `noiseIndex`, in the population's noise definition. */
function memberKey(p: Population, noiseIndex: number): NoiseKey {
  return { runSeed: p.runSeed, iteration: p.iteration, member: noiseIndex, ...(p.noise ? { definition: p.noise } : {}) };
}

/** Calls `visit` once per member group with θ perturbed to that member (`perturbed` false: θ itself). */
export async function forEachMember(
  t: FullModeTheta,
  members: ReadonlyArray<Member | null>,
  p: Population | null,
  visit: (rows: number[], perturbed: boolean) => Promise<void>,
): Promise<void> {
  const groups = new Map<number, number[]>(); // member index (−1 = base) → row indices, in arrival order
  members.forEach((m, i) => groups.set(m ? m.index : -1, [...(groups.get(m ? m.index : -1) ?? []), i]));
  const order = [...groups.values()].map((rows) => ({ rows, member: members[rows[0]] }));
  order.sort((a, b) => (a.member?.noiseIndex ?? -1) - (b.member?.noiseIndex ?? -1) || (b.member?.sign ?? 0) - (a.member?.sign ?? 0));
  let current: Perturbation | null = null;
  const segments = targeted(t, p?.targets);
  try {
    for (const { rows, member } of order) {
      if (!member) {
        if (current) await t.switcher.restore(segments, current);
        current = null;
      } else {
        const c = member.sign * p!.sigma;
        if (current && current.key.member === member.noiseIndex) current = await t.switcher.switchTo(segments, current, c);
        else {
          if (current) await t.switcher.restore(segments, current);
          current = null; // θ is restored: a throw in perturb must not restore it twice
          current = await t.switcher.perturb(segments, memberKey(p!, member.noiseIndex), c);
        }
      }
      relink(t);
      await visit(rows, current !== null);
    }
  } finally {
    if (current) await t.switcher.restore(segments, current);
    relink(t);
  }
}

/** Full mode's update, the same for both strategies: θ ← (1 − decay)·θ + Σ coef·ε, in place over the targeted segments. */
export function applyFullUpdate(t: FullModeTheta, u: EngineUpdate): void {
  applyDenseUpdate(targeted(t, u.targets), u.runSeed, u.iteration, u.coefficients, { decay: u.decay ?? 0, ...(u.noise ? { noise: u.noise } : {}) });
}
