/**
 * `esopt models rm`: a name leaves the catalog. Its blobs and manifest stay by default: another name may
 * share them, and a run pinned to the manifest resumes from them. `prune` then deletes every blob and
 * manifest that no remaining name points at, which a pinned run of them can no longer resume from (unless
 * its box has it cached); a push running at the same time may lose blobs it has sent but not yet named.
 */
import { keys, parseModelContentKey } from '../../../shared/keys.ts';
import { listNamedModels } from '../../../shared/model-catalog.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { ModelName } from '../../../shared/schemas/index.ts';

export interface RemoveResult {
  name: string;
  /** Whether the name was there to remove. */
  removed: boolean;
  /** With prune: the blobs and manifests deleted, by sha256. */
  prunedBlobs: string[];
  prunedManifests: string[];
}

export async function removeModel(store: ObjectStore, name: string, o: { prune?: boolean } = {}): Promise<RemoveResult> {
  ModelName.parse(name);
  const key = keys.modelName(name);
  const removed = (await store.get(key)) !== null;
  if (removed) await store.delete(key);
  const result: RemoveResult = { name, removed, prunedBlobs: [], prunedManifests: [] };
  if (!o.prune) return result;
  const kept = await listNamedModels(store);
  const keptBlobs = new Set(kept.flatMap((m) => m.manifest.files.map((f) => f.sha256)));
  const keptManifests = new Set(kept.map((m) => m.manifestSha256));
  const stored = [...(await store.list(keys.modelBlobs())), ...(await store.list(keys.modelManifests()))];
  for (const k of stored) {
    const content = parseModelContentKey(k);
    if (!content) continue;
    if (content.kind === 'blob' && !keptBlobs.has(content.sha256)) {
      await store.delete(k);
      result.prunedBlobs.push(content.sha256);
    } else if (content.kind === 'manifest' && !keptManifests.has(content.sha256)) {
      await store.delete(k);
      result.prunedManifests.push(content.sha256);
    }
  }
  return result;
}
