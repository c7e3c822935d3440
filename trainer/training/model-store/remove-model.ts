/**
 * `esopt models rm`: a name leaves the catalog. Its blobs and manifest stay by default: another name may
 * share them, and a run pinned to the manifest resumes from them. `prune` then deletes the blobs and
 * manifests nothing keeps.
 *
 * Invariant: a prune keeps every manifest a remaining name points at or a run or evaluation pins (ran,
 * running or queued: model-pins.ts), every blob of those, every blob a push under way will name (its
 * record under `models/pushes/`, written before it looks for any blob), and every blob and manifest
 * written within the grace period. A push that started within the grace period therefore loses nothing:
 * what it sends is new, and what it finds stored is in its record.
 */
import { keys, parseModelContentKey } from '../../../shared/keys.ts';
import { listNamedModels, readManifest } from '../../../shared/model-catalog.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { ModelName, ModelPushRecord } from '../../../shared/schemas/index.ts';
import { readJson } from '../../../shared/store/json.ts';
import { listModelPins } from './model-pins.ts';

/** What a prune leaves alone for being recent: longer than any push of a model takes. */
export const DEFAULT_PRUNE_GRACE_MS = 24 * 3_600_000;

export interface RemoveOptions {
  prune?: boolean;
  /** Blobs, manifests and push records written within this long are kept (default DEFAULT_PRUNE_GRACE_MS). */
  graceMs?: number;
  now?: Date;
}

export interface RemoveResult {
  name: string;
  /** Whether the name was there to remove. */
  removed: boolean;
  /** With prune: the blobs and manifests deleted, by sha256. */
  prunedBlobs: string[];
  prunedManifests: string[];
  /** With prune: manifests no name points at, kept because work pins them, with what pins each. */
  pinnedManifests: Array<{ manifest: string; by: string[] }>;
  /** With prune: blobs and manifests nothing keeps, left because they are newer than the grace period. */
  keptRecent: number;
}

export async function removeModel(store: ObjectStore, name: string, o: RemoveOptions = {}): Promise<RemoveResult> {
  ModelName.parse(name);
  const key = keys.modelName(name);
  const removed = (await store.get(key)) !== null;
  if (removed) await store.delete(key);
  const result: RemoveResult = { name, removed, prunedBlobs: [], prunedManifests: [], pinnedManifests: [], keptRecent: 0 };
  if (!o.prune) return result;
  const cutoff = (o.now ?? new Date()).getTime() - (o.graceMs ?? DEFAULT_PRUNE_GRACE_MS);

  const named = await listNamedModels(store);
  const keptManifests = new Set(named.map((m) => m.manifestSha256));
  const keptBlobs = new Set(named.flatMap((m) => m.manifest.files.map((f) => f.sha256)));
  const pinnedBy = new Map<string, string[]>();
  for (const pin of await listModelPins(store)) pinnedBy.set(pin.manifest, [...(pinnedBy.get(pin.manifest) ?? []), pin.by]);
  for (const [manifest, by] of pinnedBy) {
    if (!keptManifests.has(manifest)) result.pinnedManifests.push({ manifest, by });
    keptManifests.add(manifest);
    for (const f of (await readManifest(store, manifest))?.files ?? []) keptBlobs.add(f.sha256);
  }

  // Read last, right before anything is deleted: a push that began meanwhile has its record here.
  for (const record of await store.listObjects(keys.modelPushes())) {
    const push = await readJson(store, record.key, ModelPushRecord).catch(() => null);
    if (record.modifiedAt.getTime() < cutoff) await store.delete(record.key);
    else for (const sha of push?.blobs ?? []) keptBlobs.add(sha);
  }

  const stored = [...(await store.listObjects(keys.modelBlobs())), ...(await store.listObjects(keys.modelManifests()))];
  for (const { key: k, modifiedAt } of stored) {
    const content = parseModelContentKey(k);
    if (!content || (content.kind === 'blob' ? keptBlobs : keptManifests).has(content.sha256)) continue;
    if (modifiedAt.getTime() >= cutoff) {
      result.keptRecent++;
      continue;
    }
    await store.delete(k);
    (content.kind === 'blob' ? result.prunedBlobs : result.prunedManifests).push(content.sha256);
  }
  return result;
}
