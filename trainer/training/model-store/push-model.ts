/**
 * `esopt models push`: a model directory into the store by content. The directory is checked to be a
 * loadable model (the loader's cheap checks) before anything is sent; each file is hashed streaming,
 * uploaded only when no blob of that sha256 is there yet (create-only, its sha256 checked again as it is
 * sent, so a file changed since it was hashed is refused), and the name is written last: a push that
 * stops half way leaves blobs but lists no model. Before it looks for any blob, a push records the blobs it
 * will name under `models/pushes/` (deleted once the name is written), so that a prune running meanwhile
 * keeps a blob the push found stored and did not send (remove-model.ts).
 */
import { randomBytes } from 'node:crypto';
import { basename, resolve } from 'node:path';
import { keys } from '../../../shared/keys.ts';
import { publishNamedModel } from '../../../shared/model-catalog.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { ModelManifest, ModelName, type ModelFile, type ModelPushRecord } from '../../../shared/schemas/index.ts';
import { writeJson } from '../../../shared/store/json.ts';
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
  const pushKey = keys.modelPush(randomBytes(12).toString('hex'));
  const pending: ModelPushRecord = { startedAt: new Date().toISOString(), blobs: [...new Set(files.map((f) => f.sha256))] };
  await writeJson(store, pushKey, pending);
  let record;
  try {
    for (const [i, f] of found.entries()) {
      const { sha256, bytes } = files[i];
      const stored = await store.putFile(keys.modelBlob(sha256), f.absolute, {
        ifAbsent: true,
        sha256,
        onProgress: (n) => o.onProgress?.({ phase: 'upload', path: f.path, bytes: n, total: bytes }),
      });
      (stored ? uploaded : alreadyStored).push(f.path);
    }
    record = await publishNamedModel(store, name, manifest);
  } finally {
    await store.delete(pushKey);
  }
  return { name, manifestSha256: record.manifestSha256, files: files.length, bytes: files.reduce((n, f) => n + f.bytes, 0), uploaded, alreadyStored };
}
