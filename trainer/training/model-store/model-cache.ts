/**
 * Pushed models on this machine: each manifest downloaded once into `<cache>/store/<manifest sha256>/`
 * (the cache root is ESOPT_MODEL_CACHE, else .esopt/models, as for presets). Every file is streamed from
 * its blob with its sha256 checked as it arrives; a file that does not match its manifest is refused,
 * naming it. The download goes to a process-unique directory beside the final one and is renamed into
 * place whole, so a crash never leaves a directory that looks complete, and two processes pulling at once
 * both end with the same one.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import type { ModelManifest } from '../../../shared/schemas/index.ts';
import { ContentMismatchError } from '../../../shared/store/content-digest.ts';
import { DEFAULT_MODEL_CACHE } from '../../engine/model/preset-dir.ts';
import type { TransferProgress } from './model-files.ts';

export function modelCacheRoot(env: Record<string, string | undefined> = process.env): string {
  return env.ESOPT_MODEL_CACHE || DEFAULT_MODEL_CACHE;
}

/** Where a manifest's model lives in the cache under `root`. */
export function cachedModelDir(root: string, manifestSha256: string): string {
  return join(root, 'store', manifestSha256);
}

/** Whether `dir` holds every file of the manifest at its size (what a directory renamed into place whole has). */
function isComplete(dir: string, manifest: ModelManifest): boolean {
  return manifest.files.every((f) => {
    try {
      return statSync(join(dir, ...f.path.split('/'))).size === f.bytes;
    } catch {
      return false;
    }
  });
}

export interface PullOptions {
  root?: string;
  /** How errors name the model, e.g. `qwen@1a2b…`. */
  label?: string;
  onProgress?: (p: TransferProgress) => void;
}

/** The manifest's model as a directory on this machine, downloaded into the cache if it is not there yet. */
export async function pullModel(store: ObjectStore, manifestSha256: string, manifest: ModelManifest, o: PullOptions = {}): Promise<string> {
  const dir = cachedModelDir(o.root ?? modelCacheRoot(), manifestSha256);
  const label = o.label ?? `manifest ${manifestSha256}`;
  if (existsSync(dir)) {
    if (isComplete(dir, manifest)) return dir;
    throw new Error(`model ${label}: the cached ${dir} does not hold every file of its manifest at its size; remove it to download it again`);
  }
  const partial = `${dir}.partial-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    for (const f of manifest.files) {
      const target = join(partial, ...f.path.split('/'));
      mkdirSync(dirname(target), { recursive: true });
      let found;
      try {
        found = await store.getToFile(keys.modelBlob(f.sha256), target, { sha256: f.sha256, onProgress: (n) => o.onProgress?.({ phase: 'download', path: f.path, bytes: n, total: f.bytes }) });
      } catch (err) {
        if (err instanceof ContentMismatchError) throw new Error(`model ${label}: ${f.path} does not match its manifest (sha256 ${err.actual}, the manifest says ${f.sha256}); nothing was cached`);
        throw err;
      }
      if (!found) throw new Error(`model ${label}: ${f.path} is missing from the store (blob ${keys.modelBlob(f.sha256)}); push the model again`);
      const size = statSync(target).size;
      if (size !== f.bytes) throw new Error(`model ${label}: ${f.path} is ${size} bytes where its manifest says ${f.bytes}; nothing was cached`);
    }
    mkdirSync(dirname(dir), { recursive: true });
    try {
      renameSync(partial, dir);
    } catch (err) {
      // Another process finished the same manifest first: theirs is the same bytes.
      if (!(existsSync(dir) && isComplete(dir, manifest))) throw err;
    }
  } finally {
    rmSync(partial, { recursive: true, force: true });
  }
  return dir;
}
