/**
 * The sha256 and byte count of a body as it streams through, for both adapters' `putFile` and
 * `getToFile`: a pass-through that hashes every chunk in order, so a transfer is checked in the same
 * pass that moves it.
 */
import { createHash, type Hash } from 'node:crypto';
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
