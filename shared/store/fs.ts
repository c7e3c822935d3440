/**
 * The embedded ObjectStore: a directory. Readers never see a torn object because every write goes
 * to a staging file first; an overwrite then `rename`s it into place, and a create-only write
 * `link`s it, which fails with EEXIST atomically when the key exists. Of any number of concurrent
 * create-only writers of one key exactly one wins, across threads and processes alike.
 */
import { randomBytes } from 'node:crypto';
import { link, mkdir, readdir, readFile, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ObjectStore, PutOptions } from '../ports/object-store.ts';
import { assertStoreKey, assertStorePrefix, FS_STAGING_DIR } from './store-key.ts';

function isCode(err: unknown, code: string): boolean {
  return (err as NodeJS.ErrnoException | null)?.code === code;
}

export class FsObjectStore implements ObjectStore {
  constructor(readonly root: string) {}

  private path(key: string): string {
    return join(this.root, ...assertStoreKey(key).split('/'));
  }

  async put(key: string, body: Uint8Array | string, options: PutOptions = {}): Promise<boolean> {
    const target = this.path(key);
    const staging = join(this.root, FS_STAGING_DIR);
    await Promise.all([mkdir(dirname(target), { recursive: true }), mkdir(staging, { recursive: true })]);
    const temp = join(staging, `${process.pid}-${randomBytes(8).toString('hex')}`);
    await writeFile(temp, body);
    try {
      if (!options.ifAbsent) {
        await rename(temp, target);
        return true;
      }
      try {
        await link(temp, target);
        return true;
      } catch (err) {
        if (isCode(err, 'EEXIST')) return false;
        throw err;
      }
    } finally {
      await rm(temp, { force: true });
    }
  }

  async get(key: string): Promise<Uint8Array | null> {
    try {
      return new Uint8Array(await readFile(this.path(key)));
    } catch (err) {
      if (isCode(err, 'ENOENT') || isCode(err, 'EISDIR') || isCode(err, 'ENOTDIR')) return null;
      throw err;
    }
  }

  async list(prefix: string): Promise<string[]> {
    assertStorePrefix(prefix);
    // Walk only the deepest directory the prefix names, then filter by the rest of it.
    const dirPart = prefix.includes('/') ? prefix.slice(0, prefix.lastIndexOf('/')) : '';
    const found: string[] = [];
    const walk = async (relDir: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(relDir === '' ? this.root : join(this.root, ...relDir.split('/')), { withFileTypes: true });
      } catch (err) {
        if (isCode(err, 'ENOENT') || isCode(err, 'ENOTDIR')) return;
        throw err;
      }
      await Promise.all(
        entries.map(async (entry) => {
          const rel = relDir === '' ? entry.name : `${relDir}/${entry.name}`;
          if (relDir === '' && entry.name === FS_STAGING_DIR) return;
          if (entry.isDirectory()) {
            if (rel.startsWith(prefix) || prefix.startsWith(`${rel}/`)) await walk(rel);
          } else if (entry.isFile() && rel.startsWith(prefix)) {
            found.push(rel);
          }
        }),
      );
    };
    await walk(dirPart);
    // Code-unit order, the same order S3 lists keys in.
    return found.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  async delete(key: string): Promise<void> {
    try {
      await unlink(this.path(key));
    } catch (err) {
      if (!isCode(err, 'ENOENT')) throw err;
    }
  }
}
