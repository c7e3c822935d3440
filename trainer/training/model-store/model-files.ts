/**
 * A model directory's files as the model store sees them: every regular file below it, by its
 * `/`-separated relative path, each hashed streaming. Entries whose name starts with `.` (`.git`,
 * `.cache`, `.gitattributes`) are not the model's and are left out.
 *
 * Invariant: only what is inside the directory is read. A symbolic link is followed only where it stays
 * inside it — or, for a snapshot of a Hugging Face cache (`…/models--org--name/snapshots/{rev}/`), where it
 * leads into that repository's `blobs/`, as the cache's own links do; any other link is refused, naming
 * it, so a link to a key file cannot ship in the store and in every export of the model.
 */
import { readdirSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative } from 'node:path';
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

/** Whether `path` is `root` or below it (both real paths). */
function within(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/** The real paths a link under `dir` may lead to: the directory, and a Hugging Face cache snapshot's `blobs/`. */
function allowedRoots(dir: string): string[] {
  const real = realpathSync(dir);
  const roots = [real];
  // …/models--org--name/snapshots/{rev}[/sub]: the cache links each file to …/models--org--name/blobs/{hash}.
  for (let at = real; dirname(at) !== at; at = dirname(at)) {
    const snapshots = dirname(at);
    if (basename(snapshots) === 'snapshots' && /^(models|datasets|spaces)--/.test(basename(dirname(snapshots)))) {
      roots.push(join(dirname(snapshots), 'blobs'));
      break;
    }
  }
  return roots;
}

/** The files under `dir`, sorted by path in code-unit order (the manifest's order); a link out of it is refused. */
export function listDirectoryFiles(dir: string): DirectoryFile[] {
  const found: DirectoryFile[] = [];
  const roots = allowedRoots(dir);
  // A link to a folder above it inside the directory would otherwise be walked for ever.
  const walked = new Set<string>([roots[0]!]);
  const walk = (relative: string) => {
    const here = relative === '' ? dir : join(dir, ...relative.split('/'));
    for (const name of readdirSync(here)) {
      if (name.startsWith('.')) continue;
      const path = relative === '' ? name : `${relative}/${name}`;
      const absolute = join(here, name);
      const target = realpathSync(absolute);
      if (!roots.some((root) => within(root, target))) {
        throw new Error(`${absolute}: a link out of the model's directory (to ${target}); only files inside it are pushed: copy the file in, or remove the link`);
      }
      const stat = statSync(absolute);
      if (stat.isDirectory()) {
        if (walked.has(target)) throw new Error(`${absolute}: a link to a folder already walked (${target}), a loop`);
        walked.add(target);
        walk(path);
      } else if (stat.isFile()) {
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
