/**
 * The sha256 and byte count of a body as it streams through, for both adapters' `putFile` and
 * `getToFile`: a pass-through that hashes every chunk in order, so a transfer is checked in the same
 * pass that moves it.
 */
import { createHash, type Hash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { Transform, type TransformCallback } from 'node:stream';
import type { StreamOptions } from '../ports/object-store.ts';

/** A body whose sha256 is not the one the caller expected: `where` names the file or key. */
export class ContentMismatchError extends Error {
  constructor(
    readonly where: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(`${where}: sha256 ${actual} where ${expected} was expected`);
    this.name = 'ContentMismatchError';
  }
}

/** What a file copy moves per read. */
const COPY_CHUNK = 4 * 1024 * 1024;

export function assertSha256(hex: string | undefined): void {
  if (hex !== undefined && !/^[0-9a-f]{64}$/.test(hex)) throw new Error(`invalid sha256 ${JSON.stringify(hex)}: must be 64 lowercase hex digits`);
}

export class ContentDigest {
  private readonly hash: Hash = createHash('sha256');
  bytes = 0;

  constructor(private readonly options: StreamOptions = {}) {
    assertSha256(options.sha256);
  }

  update(chunk: Uint8Array): void {
    this.hash.update(chunk);
    this.bytes += chunk.byteLength;
    this.options.onProgress?.(this.bytes);
  }

  /** The hex digest; throws ContentMismatchError naming `where` when the caller expected another one. */
  check(where: string): string {
    const actual = this.hash.digest('hex');
    if (this.options.sha256 !== undefined && actual !== this.options.sha256) throw new ContentMismatchError(where, this.options.sha256, actual);
    return actual;
  }

  /**
   * Copies the file at `from` into `to` (opened with `flags`) through this digest: one buffer of `chunk`
   * bytes read, hashed and written in turn, reused throughout, so a multi-GiB file costs no allocation per
   * chunk (a stream's fresh buffer per chunk cost more than the hashing did). `to` null: hash only.
   *
   * The copy is sparse, as `cp` makes one: a chunk that is all zero bytes is hashed but not written, left a
   * hole that reads back as zeros, and the file is then cut to the bytes copied, so a trailing hole has its
   * size. `flags` opens `to` empty ('w' truncates, 'wx' creates), so the holes read as zeros. Each
   * written page of the target costs the kernel a page of cache; a 2 GiB sparse file copied whole cost a
   * loaded 2-core VM ≈ 15–25 s of system time per copy, where the holes cost nothing.
   */
  async copyFile(from: string, to: string | null, flags: 'w' | 'wx' = 'w', chunk = COPY_CHUNK): Promise<void> {
    const source = await open(from, 'r');
    const target = to === null ? null : await open(to, flags).catch(async (err: unknown) => {
      await source.close();
      throw err;
    });
    try {
      const buffer = Buffer.allocUnsafe(chunk);
      const zeros = target ? Buffer.alloc(chunk) : null;
      let position = 0;
      for (;;) {
        const { bytesRead } = await source.read(buffer, 0, chunk, null);
        if (bytesRead === 0) break;
        const filled = buffer.subarray(0, bytesRead);
        this.update(filled);
        if (target && !filled.equals(zeros!.subarray(0, bytesRead))) {
          for (let at = 0; at < bytesRead; ) at += (await target.write(filled, at, bytesRead - at, position + at)).bytesWritten;
        }
        position += bytesRead;
      }
      // A trailing hole: the file's size is still that of its last write.
      if (target) await target.truncate(position);
    } finally {
      await Promise.all([source.close(), target?.close()]);
    }
  }

  /** A stream stage that feeds this digest and passes every chunk on unchanged. */
  tap(): Transform {
    return new Transform({
      transform: (chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) => {
        this.update(chunk);
        done(null, chunk);
      },
    });
  }
}
