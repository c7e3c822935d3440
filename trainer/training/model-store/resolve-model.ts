/**
 * The one step between a model spec and the loader, taken by every entry point that opens a spec (the
 * run wiring, the model host, replicas): a preset or a directory is already local; a named model is read
 * from the store (by its pinned manifest when the spec has one, else by its name's current manifest) and
 * pulled into the cache, and the loader then opens that directory. `openModel` stays synchronous.
 */
import { readManifest, readNamedModel } from '../../../shared/model-catalog.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import type { LocalModelSpec, ModelSpec } from '../../../shared/schemas/index.ts';
import type { TransferProgress } from './model-files.ts';
import { pullModel } from './model-cache.ts';

export interface ResolveOptions {
  /** The cache root (default ESOPT_MODEL_CACHE, else .esopt/models). */
  cacheRoot?: string;
  onProgress?: (p: TransferProgress) => void;
}

export async function resolveModelSpec(spec: ModelSpec, store: ObjectStore | undefined, o: ResolveOptions = {}): Promise<LocalModelSpec> {
  if (!('name' in spec)) return spec;
  if (!store) throw new Error(`model ${spec.name}: a named model is read from a model store, and none was given here (name a preset or a dir)`);
  let manifestSha = spec.manifest;
  let manifest;
  if (manifestSha !== undefined) {
    manifest = await readManifest(store, manifestSha);
    if (!manifest) throw new Error(`model ${spec.name}: its pinned manifest ${manifestSha} is not in the store (was it pruned by esopt models rm --prune?)`);
  } else {
    const record = await readNamedModel(store, spec.name);
    if (!record) throw new Error(`model ${spec.name}: no such name in the store (esopt models push DIR --name ${spec.name})`);
    manifestSha = record.manifestSha256;
    manifest = record.manifest;
  }
  const dir = await pullModel(store, manifestSha, manifest, { root: o.cacheRoot, label: `${spec.name}@${manifestSha.slice(0, 12)}`, onProgress: o.onProgress });
  return { dir };
}
