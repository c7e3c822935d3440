/**
 * The model store's catalog: which names exist, the manifest each points at, and the manifests by their
 * own sha256. Both the API (to pin a request's model name) and the trainer (to push, list and pull) read
 * it through here. A manifest's sha256 is of its canonical bytes (`manifestBytes`), which are exactly the
 * bytes stored under `keys.modelManifest`, so anyone can check a stored manifest against its key.
 */
import { createHash } from 'node:crypto';
import { keys, parseModelNameKey } from './keys.ts';
import type { ObjectStore } from './ports/object-store.ts';
import { ModelManifest, NamedModel, Sha256 } from './schemas/index.ts';
import { formatIssues } from './validation.ts';
import { readJson, writeJson } from './store/json.ts';

const decoder = new TextDecoder();

/** The canonical bytes: JSON of the files in path order, each `{path, bytes, sha256}` in that key order, no spaces. */
export function manifestBytes(manifest: ModelManifest): Uint8Array {
  const checked = ModelManifest.safeParse(manifest);
  if (!checked.success) throw new Error(`invalid model manifest: ${formatIssues(checked.error)}`);
  const files = checked.data.files.map(({ path, bytes, sha256 }) => ({ path, bytes, sha256 }));
  return new TextEncoder().encode(JSON.stringify({ files }));
}

export function manifestSha256(manifest: ModelManifest): string {
  return createHash('sha256').update(manifestBytes(manifest)).digest('hex');
}

/** The manifest stored under its sha256, checked against it; null when there is none. */
export async function readManifest(store: ObjectStore, sha256: string): Promise<ModelManifest | null> {
  const key = keys.modelManifest(sha256);
  const body = await store.get(key);
  if (body === null) return null;
  const actual = createHash('sha256').update(body).digest('hex');
  if (actual !== sha256) throw new Error(`${key}: the stored manifest hashes to ${actual}, not to its key`);
  return ModelManifest.parse(JSON.parse(decoder.decode(body)));
}

/** The name's record, its manifest checked against the sha256 it names; null when there is no such name. */
export async function readNamedModel(store: ObjectStore, name: string): Promise<NamedModel | null> {
  const key = keys.modelName(name);
  const record = await readJson(store, key, NamedModel);
  if (record === null) return null;
  const actual = manifestSha256(record.manifest);
  if (actual !== record.manifestSha256) throw new Error(`${key}: its manifest hashes to ${actual}, not to the ${record.manifestSha256} it names`);
  return record;
}

/** Every name in the store with its record, by name. */
export async function listNamedModels(store: ObjectStore): Promise<NamedModel[]> {
  const names = (await store.list(keys.modelNames())).map(parseModelNameKey).filter((n): n is string => n !== null);
  const records = await Promise.all(names.map((n) => readNamedModel(store, n)));
  return records.filter((r): r is NamedModel => r !== null);
}

/**
 * Stores the manifest under its sha256 (create-only: equal manifests are one object), then points `name`
 * at it. The name goes last, so a name never points at a manifest that is not there.
 */
export async function publishNamedModel(store: ObjectStore, name: string, manifest: ModelManifest, pushedAt = new Date()): Promise<NamedModel> {
  const manifestSha = manifestSha256(manifest);
  await store.put(keys.modelManifest(manifestSha), manifestBytes(manifest), { ifAbsent: true, contentType: 'application/json' });
  const record = NamedModel.parse({ name, manifestSha256: manifestSha, manifest, pushedAt: pushedAt.toISOString() });
  await writeJson(store, keys.modelName(name), record);
  return record;
}

/** A named model spec that cannot be pinned: `field` is `name` or `manifest`, relative to the spec. */
export class UnknownModelError extends Error {
  constructor(
    readonly field: 'name' | 'manifest',
    message: string,
  ) {
    super(message);
    this.name = 'UnknownModelError';
  }
}

/**
 * A named model spec pinned to a manifest: a given manifest sha256 must be in the store, else the name's
 * current manifest is taken. What a run or an evaluation stores, so a re-push of the name never changes it.
 */
export async function pinModelName(store: ObjectStore, spec: { name: string; manifest?: string }): Promise<{ name: string; manifest: string }> {
  if (spec.manifest !== undefined) {
    if (!Sha256.safeParse(spec.manifest).success) throw new UnknownModelError('manifest', `${JSON.stringify(spec.manifest)} is not a sha256`);
    if ((await readManifest(store, spec.manifest)) === null) throw new UnknownModelError('manifest', `no manifest ${spec.manifest} in the model store (esopt models show ${spec.name} names the current one)`);
    return { name: spec.name, manifest: spec.manifest };
  }
  const record = await readNamedModel(store, spec.name);
  if (!record) throw new UnknownModelError('name', `no model named ${JSON.stringify(spec.name)} in the model store: push it first (esopt models push DIR --name ${spec.name})`);
  return { name: spec.name, manifest: record.manifestSha256 };
}
