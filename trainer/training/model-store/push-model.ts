/**
 * `esopt models push`: a model directory into the store by content. The directory is checked to be a
 * loadable model (the loader's cheap checks) before anything is sent; each file is hashed streaming,
 * uploaded only when no blob of that sha256 is there yet (create-only, its sha256 checked again as it is
 * sent, so a file changed since it was hashed is refused), and the name is written last: a push that
 * stops half way leaves blobs but lists no model.
 */
import { basename, resolve } from 'node:path';
import { keys } from '../../../shared/keys.ts';
import { publishNamedModel } from '../../../shared/model-catalog.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { ModelManifest, ModelName, type ModelFile } from '../../../shared/schemas/index.ts';
import { checkModelDir } from '../../engine/model/model-dir.ts';
import { hashFile, listDirectoryFiles, type TransferProgress } from './model-files.ts';

export interface PushOptions {
  /** Default: the directory's own name. */
  name?: string;
  onProgress?: (p: TransferProgress) => void;
}

export interface PushResult {
  name: string;
  manifestSha256: string;
  files: number;
  bytes: number;
  /** Files whose blob this push stored. */
  uploaded: string[];
  /** Files whose blob was in the store already (pushed before, by this name or another). */
  alreadyStored: string[];
}

/** The name a push gives a directory when none is given: its own name, which must then be a valid model name. */
export function defaultModelName(dir: string): string {
  const name = basename(resolve(dir));
  const r = ModelName.safeParse(name);
  if (!r.success) throw new Error(`the directory's name ${JSON.stringify(name)} is not a model name (${r.error.issues[0]?.message}): give one with --name`);
  return name;
}

export async function pushModel(store: ObjectStore, dir: string, o: PushOptions = {}): Promise<PushResult> {
  const name = o.name ?? defaultModelName(dir);
  const named = ModelName.safeParse(name);
  if (!named.success) throw new Error(`model name ${JSON.stringify(name)}: ${named.error.issues[0]?.message}`);
  checkModelDir(dir);
  const found = listDirectoryFiles(dir);
  const files: ModelFile[] = [];
  for (const f of found) {
    const { sha256, bytes } = await hashFile(f.absolute, (n) => o.onProgress?.({ phase: 'hash', path: f.path, bytes: n, total: f.bytes }));
    files.push({ path: f.path, bytes, sha256 });
  }
  const manifest = ModelManifest.parse({ files });
  const uploaded: string[] = [];
  const alreadyStored: string[] = [];
  for (const [i, f] of found.entries()) {
    const { sha256, bytes } = files[i];
    const stored = await store.putFile(keys.modelBlob(sha256), f.absolute, {
      ifAbsent: true,
      sha256,
      onProgress: (n) => o.onProgress?.({ phase: 'upload', path: f.path, bytes: n, total: bytes }),
    });
    (stored ? uploaded : alreadyStored).push(f.path);
  }
  const record = await publishNamedModel(store, name, manifest);
  return { name, manifestSha256: record.manifestSha256, files: files.length, bytes: files.reduce((n, f) => n + f.bytes, 0), uploaded, alreadyStored };
}
