/**
 * The embedded ObjectStore: a directory. Readers never see a torn object because every write goes
 * to a staging file first; an overwrite then `rename`s it into place, and a create-only write
 * `link`s it, which fails with EEXIST atomically when the key exists. Of any number of concurrent
 * create-only writers of one key exactly one wins, across threads and processes alike.
 *
 * Small objects (reward records, manifests, logs) go through synchronous syscalls; only bodies over
 * SYNC_IO_LIMIT (checkpoints) take the promise API. Each promise call is a hop to libuv's thread pool
 * and back, and on a small VM every hop waits for a sleeping vCPU to wake: a reward's get +
 * create-only put measured ≈ 600–700 µs that way against ≈ 65–75 µs with the syscalls made directly
 * (docs/CLOUD.md), and those hops, not the episodes, were most of what a pool of CPU-light episode
 * workers spent (`esopt bench fanout`). A small call blocks the event loop for tens of microseconds,
 * less than the hops cost the loop in callbacks; a large one would block it for milliseconds, so it
 * stays asynchronous. Files (`putFile`, `getToFile`) are copied through one reused buffer, hashed as they go.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, fstatSync, linkSync, mkdirSync, openSync, readdirSync, readSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ListedObject, ObjectStore, PutOptions, StreamOptions } from '../ports/object-store.ts';
import { ContentDigest } from './content-digest.ts';
import { assertStoreKey, assertStorePrefix, FS_STAGING_DIR } from './store-key.ts';

/** Bodies up to this size are written and read with synchronous syscalls (see above). */
export const SYNC_IO_LIMIT = 256 * 1024;

function isCode(err: unknown, code: string): boolean {
  return (err as NodeJS.ErrnoException | null)?.code === code;
}

function byteLength(body: Uint8Array | string): number {
  return typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
}

/** Reads an open file of `size` bytes; a file that grew meanwhile is read to its end all the same. */
function readWhole(fd: number, size: number): Uint8Array {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    const chunk = Buffer.allocUnsafe(total < size ? size - total : 8192);
    const n = readSync(fd, chunk, 0, chunk.length, null);
    if (n === 0) break;
    chunks.push(chunk.subarray(0, n));
    total += n;
  }
  return new Uint8Array(Buffer.concat(chunks, total));
}

/** Whether a file lies anywhere below `dir` (stops at the first). */
function hasFile(dir: string): boolean {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isFile()) return true;
    if (entry.isDirectory() && hasFile(join(dir, entry.name))) return true;
  }
  return false;
}

export class FsObjectStore implements ObjectStore {
  constructor(readonly root: string) {}

  private path(key: string): string {
    return join(this.root, ...assertStoreKey(key).split('/'));
  }

  /** A fresh staging path beside the key's directory (made), on the root's filesystem. */
  private stage(target: string): string {
    const staging = join(this.root, FS_STAGING_DIR);
    mkdirSync(dirname(target), { recursive: true });
    mkdirSync(staging, { recursive: true });
    return join(staging, `${process.pid}-${randomBytes(8).toString('hex')}`);
  }

  async put(key: string, body: Uint8Array | string, options: PutOptions = {}): Promise<boolean> {
    const target = this.path(key);
    const temp = this.stage(target);
    if (byteLength(body) <= SYNC_IO_LIMIT) writeFileSync(temp, body, { flag: 'wx' });
    else await writeFile(temp, body, { flag: 'wx' });
    return this.publish(temp, target, options);
  }

  async putFile(key: string, path: string, options: PutOptions & StreamOptions = {}): Promise<boolean> {
    const target = this.path(key);
    const digest = new ContentDigest(options);
    // Create-only and already there: nothing to copy (the link below would refuse it all the same).
    if (options.ifAbsent && existsSync(target)) return false;
    const temp = this.stage(target);
    try {
      await digest.copyFile(path, temp, 'wx');
      digest.check(path);
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
    return this.publish(temp, target, options);
  }

  async getToFile(key: string, path: string, options: StreamOptions = {}): Promise<boolean> {
    const digest = new ContentDigest(options);
    const source = this.path(key);
    // Looked up before the target is created, so a missing key leaves no file behind.
    try {
      if (statSync(source).isDirectory()) return false;
    } catch (err) {
      if (isCode(err, 'ENOENT') || isCode(err, 'ENOTDIR')) return false;
      throw err;
    }
    try {
      await digest.copyFile(source, path);
      digest.check(`${key} (into ${path})`);
    } catch (err) {
      await rm(path, { force: true });
      // Deleted between the lookup and the read: gone, as if the lookup had missed it.
      if (isCode(err, 'ENOENT') && (err as NodeJS.ErrnoException).path === source) return false;
      throw err;
    }
    return true;
  }

  /** Moves a staged file to its key: `rename` overwrites, a create-only `link` fails atomically on EEXIST. */
  private publish(temp: string, target: string, options: PutOptions): boolean {
    try {
      if (!options.ifAbsent) {
        renameSync(temp, target);
        return true;
      }
      try {
        linkSync(temp, target);
        return true;
      } catch (err) {
        if (isCode(err, 'EEXIST')) return false;
        throw err;
      }
    } finally {
      rmSync(temp, { force: true });
    }
  }

  async get(key: string): Promise<Uint8Array | null> {
    const path = this.path(key);
    let fd: number;
    try {
      fd = openSync(path, 'r');
    } catch (err) {
      if (isCode(err, 'ENOENT') || isCode(err, 'ENOTDIR')) return null;
      throw err;
    }
    try {
      const stat = fstatSync(fd);
      if (stat.isDirectory()) return null;
      if (stat.size <= SYNC_IO_LIMIT) return readWhole(fd, stat.size);
    } finally {
      closeSync(fd);
    }
    try {
      return new Uint8Array(await readFile(path));
    } catch (err) {
      // Deleted between the two opens: gone, as if the first open had missed it.
      if (isCode(err, 'ENOENT')) return null;
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

  async listObjects(prefix: string): Promise<ListedObject[]> {
    const listed = await Promise.all(
      (await this.list(prefix)).map(async (key) => {
        try {
          return [{ key, modifiedAt: (await stat(this.path(key))).mtime }];
        } catch (err) {
          // Deleted since it was listed: as if the listing had missed it.
          if (isCode(err, 'ENOENT')) return [];
          throw err;
        }
      }),
    );
    return listed.flat();
  }

  async listChildren(prefix: string): Promise<string[]> {
    assertStorePrefix(prefix);
    if (prefix !== '' && !prefix.endsWith('/')) throw new Error(`invalid store prefix ${JSON.stringify(prefix)}: listChildren needs one that is empty or ends in /`);
    let entries;
    try {
      entries = await readdir(prefix === '' ? this.root : join(this.root, ...prefix.slice(0, -1).split('/')), { withFileTypes: true });
    } catch (err) {
      if (isCode(err, 'ENOENT') || isCode(err, 'ENOTDIR')) return [];
      throw err;
    }
    const names = entries.flatMap((entry) => {
      if (prefix === '' && entry.name === FS_STAGING_DIR) return [];
      if (entry.isFile()) return [`${prefix}${entry.name}`];
      // A folder is named once some key lies below it, as S3 names only prefixes of keys.
      return entry.isDirectory() && hasFile(join(this.root, ...`${prefix}${entry.name}`.split('/'))) ? [`${prefix}${entry.name}/`] : [];
    });
    return names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  async delete(key: string): Promise<void> {
    try {
      unlinkSync(this.path(key));
    } catch (err) {
      if (!isCode(err, 'ENOENT')) throw err;
    }
  }
}
