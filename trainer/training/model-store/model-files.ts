/**
 * A model directory's files as the model store sees them: every regular file below it (symbolic links
 * followed, as a Hugging Face cache's snapshot links to its blobs), by its `/`-separated relative path,
 * each hashed streaming. Entries whose name starts with `.` (`.git`, `.cache`, `.gitattributes`) are
 * not the model's and are left out.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ModelFilePath } from '../../../shared/schemas/index.ts';
import { ContentDigest } from '../../../shared/store/content-digest.ts';

/** What a push or a pull reports as a file's bytes pass (hashed, uploaded or downloaded). */
export interface TransferProgress {
  phase: 'hash' | 'upload' | 'download';
  path: string;
  bytes: number;
  total: number;
}

export interface DirectoryFile {
  /** Relative, `/`-separated, as the manifest holds it. */
  path: string;
  /** Where it is on this machine. */
  absolute: string;
  bytes: number;
}

/** The files under `dir`, sorted by path in code-unit order (the manifest's order). */
export function listDirectoryFiles(dir: string): DirectoryFile[] {
  const found: DirectoryFile[] = [];
  const walk = (relative: string) => {
    const here = relative === '' ? dir : join(dir, ...relative.split('/'));
    for (const name of readdirSync(here)) {
      if (name.startsWith('.')) continue;
      const path = relative === '' ? name : `${relative}/${name}`;
      const absolute = join(here, name);
      const stat = statSync(absolute);
      if (stat.isDirectory()) walk(path);
      else if (stat.isFile()) {
        const checked = ModelFilePath.safeParse(path);
        if (!checked.success) throw new Error(`${absolute}: ${checked.error.issues[0]?.message}`);
        found.push({ path, absolute, bytes: stat.size });
      } else throw new Error(`${absolute}: not a regular file or a directory`);
    }
  };
  walk('');
  return found.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The file's sha256, read once through one reused buffer; `onBytes` hears the bytes hashed so far. */
export async function hashFile(path: string, onBytes?: (bytes: number) => void): Promise<{ sha256: string; bytes: number }> {
  const digest = new ContentDigest({ onProgress: onBytes });
  await digest.copyFile(path, null);
  return { sha256: digest.check(path), bytes: digest.bytes };
}
