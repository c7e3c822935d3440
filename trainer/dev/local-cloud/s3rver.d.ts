// s3rver ships no types; this is the part of its API that trainer/dev/local-cloud/s3-server.ts uses.
declare module 's3rver' {
  import type { ServerResponse } from 'node:http';
  import type { AddressInfo } from 'node:net';
  /** The part of a Koa context the dev server's middleware reads. */
  export type S3rverMiddleware = (ctx: { path: string; res: ServerResponse }, next: () => Promise<void>) => Promise<void>;
  /** s3rver's FilesystemStore: the methods the dev server's bucket-state cache and object writes wrap. */
  export interface S3rverStore {
    getBucket(bucket: string): Promise<unknown>;
    putBucket(bucket: string): Promise<unknown>;
    deleteBucket(bucket: string): Promise<unknown>;
    getSubresource(bucket: string, key: string | undefined, resourceType: string): Promise<unknown>;
    putSubresource(bucket: string, key: string | undefined, resource: unknown): Promise<unknown>;
    deleteSubresource(bucket: string, key: string | undefined, resourceType: string): Promise<unknown>;
    reset(): unknown;
    /** What the dev server's `replaceObjectsWhole` replaces and uses. */
    putObject(object: { bucket: string; key: string; metadata: Record<string, string>; content: Buffer | AsyncIterable<unknown> }): Promise<{ size: number; md5: string }>;
    putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5: string): Promise<void>;
    getResourcePath(bucket: string, key: string, resource: string): string;
  }
  interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory?: string;
    resetOnClose?: boolean;
    allowMismatchedSignatures?: boolean;
    vhostBuckets?: boolean;
    configureBuckets?: { name: string; configs?: (string | Uint8Array)[] }[];
  }
  export default class S3rver {
    constructor(options?: S3rverOptions);
    /** Koa's middleware chain (S3rver extends Koa): composed when the server starts listening. */
    middleware: S3rverMiddleware[];
    /** Where s3rver keeps buckets and objects (the same object its request handlers use). */
    store: S3rverStore;
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
  }
}
