/**
 * A real S3-compatible server (s3rver) on a random loopback port, for tests and `esopt dev cloud`.
 * Its data lives in a fresh temporary directory that `close()` removes. s3rver ignores
 * `If-None-Match` on PUT, which is exactly the server the S3 adapter's second line of defence is for.
 *
 * s3rver also writes an object in place (open with truncation, then write), where S3 replaces an object
 * whole. Two PUTs of one key at once can then leave the shorter body followed by the longer one's tail,
 * an object neither wrote (two racing deliveries of one episode did: a record that does not parse, a
 * reward lost), and a GET during a PUT reads an empty body. So a middleware at the head of s3rver's
 * chain runs the requests for one object one at a time, and `replaceObjectsWhole` makes each PUT's
 * write finish before its response (s3rver answers once it has read the request, while its file write
 * may still be pending: a contract run under load read back a torn 310-byte body, the next PUT's
 * truncate-and-write crossing the previous one's late write). So each object is replaced whole, as on
 * S3, and If-None-Match stays ignored.
 *
 * s3rver also reads its bucket's state from disk on every request (see `cacheBucketState`); that is
 * cached in memory, because in the one-machine simulation the bucket's CPU time is taken from the
 * trainer's and the functions' cores.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { S3rverMiddleware, S3rverStore } from 's3rver';
import { S3StoreConfig } from '../../../shared/store/s3.ts';

export interface LocalS3 {
  endpoint: string;
  bucket: string;
  /** Ready to hand to `bucketStore(...)` (trainer/assembly/stores.ts). */
  storeConfig: S3StoreConfig;
  close(): Promise<void>;
}

export async function startLocalS3(bucket = 'esopt-dev'): Promise<LocalS3> {
  if (bucket.length < 3) throw new Error(`bucket name ${JSON.stringify(bucket)} must have at least 3 characters`);
  let S3rver: typeof import('s3rver').default;
  try {
    S3rver = (await import('s3rver')).default;
  } catch (err) {
    throw new Error(`s3rver is a devDependency of esopt and is not installed: ${(err as Error).message}`);
  }
  const directory = await mkdtemp(join(tmpdir(), 'esopt-s3rver-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    vhostBuckets: false,
    configureBuckets: [{ name: bucket }],
  });
  // First in the chain, before s3rver's logger and router (Koa composes the chain when it starts listening).
  server.middleware.unshift(oneRequestPerObject());
  cacheBucketState(server.store);
  // Beside s3rver's directory (one filesystem, so a rename is atomic), not in it, where it would list as a bucket.
  const staging = `${directory}-staging`;
  await mkdir(staging);
  replaceObjectsWhole(server.store, staging);
  const address = await server.run();
  const endpoint = `http://127.0.0.1:${address.port}`;
  return {
    endpoint,
    bucket,
    storeConfig: S3StoreConfig.parse({
      bucket,
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      maxAttempts: 5,
      maxSockets: 50,
      retryMode: 'standard',
      // s3rver checks signatures against its fixed development key pair.
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    }),
    async close() {
      await server.close();
      await Promise.all([directory, staging].map((d) => rm(d, { recursive: true, force: true })));
    },
  };
}

/**
 * A Koa middleware for the front of s3rver's chain: requests naming one object (`/bucket/key…`,
 * path-style) run one at a time per object, each until its response has been sent to the end (a GET's
 * body streams from the file after the chain returns, so the turn ends at the response's finish, not at
 * `next()`). Listings and bucket requests pass at once. Inside s3rver's own server, not a proxy in
 * front of it: no second HTTP hop per request.
 */
function oneRequestPerObject(): S3rverMiddleware {
  const tails = new Map<string, Promise<void>>();
  return async (ctx, next) => {
    // `/bucket` or `/bucket/`: not one object.
    if (!/^\/[^/]+\/./.test(ctx.path)) return next();
    const previous = tails.get(ctx.path) ?? Promise.resolve();
    let release!: () => void;
    const turn = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => turn);
    tails.set(ctx.path, tail);
    void tail.then(() => {
      if (tails.get(ctx.path) === tail) tails.delete(ctx.path);
    });
    ctx.res.once('finish', release);
    ctx.res.once('close', release);
    await previous;
    try {
      await next();
    } catch (err) {
      release();
      throw err;
    }
  };
}

/**
 * s3rver asks its store on every request whether the bucket exists (a stat) and for the bucket's CORS and
 * website configurations (two file reads, which fail with ENOENT when none is set, the usual case). In a
 * 1,000-episode `bench fanout` iteration that was about a quarter of s3rver's CPU time (profiled: 1.6 s
 * in the bucket check, 1.0 s website, 0.8 s CORS, of 11.7 s). Buckets and their configurations change
 * only through this same store, so the answers are kept in memory and dropped whenever the store
 * creates, deletes or reconfigures a bucket. Per-object subresources (`key` set) are not cached.
 */
function cacheBucketState(store: S3rverStore): void {
  const buckets = new Map<string, Promise<unknown>>();
  const configs = new Map<string, Promise<unknown>>();
  const forget = () => {
    buckets.clear();
    configs.clear();
  };
  const { getBucket, putBucket, deleteBucket, getSubresource, putSubresource, deleteSubresource, reset } = store;
  /** Remembers a lookup's answer, not its failure: a failed read is asked again next time. */
  const remember = (cache: Map<string, Promise<unknown>>, id: string, lookup: () => Promise<unknown>) => {
    let answer = cache.get(id);
    if (!answer) {
      answer = lookup();
      cache.set(id, answer);
      answer.catch(() => cache.delete(id));
    }
    return answer;
  };
  const changing =
    <A extends unknown[]>(change: (...args: A) => Promise<unknown>) =>
    async (...args: A) => {
      forget();
      try {
        return await change.apply(store, args);
      } finally {
        forget();
      }
    };
  store.getBucket = (bucket) => remember(buckets, bucket, () => getBucket.call(store, bucket));
  store.getSubresource = (bucket, key, resourceType) =>
    key === undefined ? remember(configs, `${bucket}/${resourceType}`, () => getSubresource.call(store, bucket, key, resourceType)) : getSubresource.call(store, bucket, key, resourceType);
  store.putBucket = changing(putBucket);
  store.deleteBucket = changing(deleteBucket);
  store.putSubresource = changing(putSubresource);
  store.deleteSubresource = changing(deleteSubresource);
  store.reset = () => {
    forget();
    return reset.call(store);
  };
}

/**
 * s3rver's `putObject` pipes the body into a write stream on the object's path and resolves when the
 * body has been read, not when the file is written. This one takes the whole body, writes it to a staging
 * file, renames that over the object (a reader sees the old object or the new one, never part of either)
 * and then stores the metadata as s3rver does, so the PUT's response comes after its object is whole.
 */
function replaceObjectsWhole(store: S3rverStore, staging: string): void {
  store.putObject = async (object) => {
    const chunks: Buffer[] = [];
    if (Buffer.isBuffer(object.content)) chunks.push(object.content);
    else for await (const chunk of object.content) chunks.push(Buffer.from(chunk as Uint8Array));
    const body = Buffer.concat(chunks);
    const path = store.getResourcePath(object.bucket, object.key, 'object');
    const staged = join(staging, randomUUID());
    await Promise.all([mkdir(dirname(path), { recursive: true }), writeFile(staged, body)]);
    await rename(staged, path);
    const md5 = createHash('md5').update(body).digest('hex');
    await store.putMetadata(object.bucket, object.key, object.metadata, md5);
    return { size: body.length, md5 };
  };
}
