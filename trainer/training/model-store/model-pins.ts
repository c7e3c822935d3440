/**
 * The manifests that work in the store pins: a run's config and an evaluation's stored request name a model
 * by `{ name, manifest }` once the API (or `esopt train`) pinned it, and a run or evaluation that is queued
 * has its config or request in the store already, so reading every config and request finds every pin —
 * of runs and evaluations that ran, run now, or wait in the queue. A prune must keep all of them: a run
 * pinned to a deleted manifest can neither resume nor export.
 */
import { z } from 'zod';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { NamedModelSpec } from '../../../shared/schemas/index.ts';
import { readJson } from '../../../shared/store/json.ts';

/** Only the part of a run's config that can pin a model: the rest may be of any version. */
const RunModel = z.object({ model: z.unknown() });
/** Only the part of an evaluation's request that can pin a model: a base model's spec. */
const EvaluationModel = z.object({ model: z.object({ kind: z.string(), model: z.unknown().optional() }) });

/** A manifest pinned, and by what (`run r1`, `evaluation e2`). */
export interface ModelPin {
  manifest: string;
  by: string;
}

/** The ids one level below `prefix` (`runs/` or `evaluations/`), from a delimiter listing. */
async function idsUnder(store: ObjectStore, prefix: string): Promise<string[]> {
  return (await store.listChildren(prefix)).filter((k) => k.endsWith('/')).map((k) => k.slice(prefix.length, -1));
}

/** Reads `each` for every id, `parallel` at a time. */
async function inBatches<T>(ids: string[], each: (id: string) => Promise<T[]>, parallel = 16): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < ids.length; i += parallel) out.push(...(await Promise.all(ids.slice(i, i + parallel).map(each))).flat());
  return out;
}

function pinOf(spec: unknown, by: string): ModelPin[] {
  const named = NamedModelSpec.safeParse(spec);
  return named.success && named.data.manifest ? [{ manifest: named.data.manifest, by }] : [];
}

/** Every manifest a run's config or an evaluation's request in the store pins. */
export async function listModelPins(store: ObjectStore): Promise<ModelPin[]> {
  const runs = await inBatches(await idsUnder(store, 'runs/'), async (run) => pinOf((await readJson(store, keys.config(run), RunModel))?.model, `run ${run}`));
  const evaluations = await inBatches(await idsUnder(store, 'evaluations/'), async (evaluation) => {
    const request = await readJson(store, keys.evaluationRequest(evaluation), EvaluationModel);
    return request?.model.kind === 'base' ? pinOf(request.model.model, `evaluation ${evaluation}`) : [];
  });
  return [...runs, ...evaluations];
}
