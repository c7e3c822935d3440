/**
 * The ObjectStore on S3 (or any S3-compatible server: `endpoint` + `forcePathStyle`).
 *
 * Create-only writes have two lines of defence:
 *  1. a HEAD first, so a re-delivered episode whose record already landed is refused on any server;
 *  2. `PutObject` with `IfNoneMatch: '*'`, which AWS S3 evaluates atomically (412 when the key exists),
 *     so of two racing writers exactly one wins.
 * Servers that ignore If-None-Match (s3rver does) keep only (1): two writers racing inside the same
 * few milliseconds may both "win", the second overwriting the first. The key is still one per
 * (run, iteration, member, task), so the reader counts it once either way; see docs/CLOUD.md.
 *
 * Throttling (503 SlowDown) and 5xx are retried by the SDK's own retry strategy with back-off and
 * jitter; `maxAttempts` and `retryMode` configure it.
 *
 * Files stream (`putFile`, `getToFile`): a file over one part is a multipart upload whose parts are read
 * from the file as they are sent (PARTS_IN_FLIGHT at a time, each `partBytes` or a 10,000th of the file),
 * hashed in order, and the upload is completed only when the whole file hashed as expected (aborted
 * otherwise, leaving nothing); create-only completes it with If-None-Match after a HEAD. A GET's body is
 * piped into the file as it arrives.
 *
 * The SDK is imported on the first request, not with this file: the fs-store paths (the local worker
 * pool, `esopt start`) import this file for its config schema and never pay for loading the SDK.
 */
import type { ListObjectsV2CommandOutput, S3Client } from '@aws-sdk/client-s3';
import { createWriteStream } from 'node:fs';
import { open, rm, writeFile } from 'node:fs/promises';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import type { ListedObject, ObjectStore, PutOptions, StreamOptions } from '../ports/object-store.ts';
import { DEFAULT_AWS_REGION } from './aws-region.ts';
import { ContentDigest } from './content-digest.ts';
import { assertStoreKey, assertStorePrefix } from './store-key.ts';

const MiB = 1024 * 1024;
/** S3's limit on a multipart upload's parts: a file larger than 10,000 parts gets larger parts. */
const MAX_PARTS = 10_000;
/** Parts read and sent at once: what a multipart upload holds in memory is this many parts. */
const PARTS_IN_FLIGHT = 4;

export const S3StoreConfig = z
  .object({
    bucket: z.string().min(3).max(63),
    region: z.string().min(1).default(DEFAULT_AWS_REGION),
    /** An S3-compatible server instead of AWS, e.g. `http://127.0.0.1:4569`. */
    endpoint: z.url().optional(),
    /** `endpoint/bucket/key` instead of `bucket.endpoint/key`: what most S3-compatible servers need. */
    forcePathStyle: z.boolean().default(false),
    /** Attempts per request, first one included; 500/502/503/504 and SlowDown are retried. */
    maxAttempts: z.number().int().min(1).max(20).default(5),
    /** `adaptive` also rate-limits the client itself after throttling responses. */
    retryMode: z.enum(['standard', 'adaptive']).default('standard'),
    /** Static credentials (S3-compatible servers); otherwise the SDK's default provider chain. */
    credentials: z.object({ accessKeyId: z.string().min(1), secretAccessKey: z.string().min(1) }).optional(),
    /** Connections to the server at once; the SDK's default of 50 queues a large fan-out's writes. */
    maxSockets: z.number().int().min(1).max(10_000).default(50),
    /** Keys per ListObjectsV2 page (S3's own limit and default is 1000). */
    listPageSize: z.number().int().min(1).max(1000).optional(),
    /** A multipart upload's part size; files up to one part go in one PUT. S3 takes parts of 5 MiB to 5 GiB. */
    partBytes: z.number().int().min(5 * MiB).max(5 * 1024 * MiB).default(8 * MiB),
  })
  .strict();
export type S3StoreConfig = z.infer<typeof S3StoreConfig>;
export type S3StoreConfigInput = z.input<typeof S3StoreConfig>;

/** How many times a create-only PUT is retried after AWS's 409 ConditionalRequestConflict. */
const CONFLICT_RETRIES = 3;

function status(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode;
}
function errorName(err: unknown): string | undefined {
  return (err as { name?: string } | null)?.name;
}

type S3Sdk = typeof import('@aws-sdk/client-s3');

export class S3ObjectStore implements ObjectStore {
  readonly config: S3StoreConfig;
  /** The SDK and its one client, made by the first request; every later request shares them. */
  private connection?: Promise<{ sdk: S3Sdk; client: S3Client }>;

  constructor(config: S3StoreConfigInput) {
    this.config = S3StoreConfig.parse(config);
  }

  private connect(): Promise<{ sdk: S3Sdk; client: S3Client }> {
    this.connection ??= import('@aws-sdk/client-s3').then((sdk) => {
      const { region, endpoint, forcePathStyle, maxAttempts, retryMode, credentials, maxSockets } = this.config;
      const client = new sdk.S3Client({
        region,
        endpoint,
        forcePathStyle,
        maxAttempts,
        retryMode,
        credentials,
        requestHandler: { httpAgent: new HttpAgent({ keepAlive: true, maxSockets }), httpsAgent: new HttpsAgent({ keepAlive: true, maxSockets }) },
        // Checksums only where S3 requires them: S3-compatible servers often reject the newer headers.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
      });
      return { sdk, client };
    });
    return this.connection;
  }

  /** The SDK client this store sends with (for calls the port has no method for, such as creating the bucket). */
  async sdkClient(): Promise<S3Client> {
    return (await this.connect()).client;
  }

  /** Closes the client's sockets; a store that never sent a request has none (and loads nothing). */
  destroy(): void {
    void this.connection?.then(({ client }) => client.destroy(), () => {});
  }

  async put(key: string, body: Uint8Array | string, options: PutOptions = {}): Promise<boolean> {
    assertStoreKey(key);
    const { sdk, client } = await this.connect();
    const input = {
      Bucket: this.config.bucket,
      Key: key,
      Body: body,
      ContentType: this.contentType(key, options),
      ...this.tagging(options),
    };
    if (!options.ifAbsent) {
      await client.send(new sdk.PutObjectCommand(input));
      return true;
    }
    if (await this.exists(key)) return false;
    for (let attempt = 0; ; attempt++) {
      try {
        await client.send(new sdk.PutObjectCommand({ ...input, IfNoneMatch: '*' }));
        return true;
      } catch (err) {
        if (status(err) === 412 || errorName(err) === 'PreconditionFailed') return false;
        // A concurrent conditional write to the same key is in flight; retrying resolves to 412 or success.
        if ((status(err) === 409 || errorName(err) === 'ConditionalRequestConflict') && attempt < CONFLICT_RETRIES) continue;
        throw err;
      }
    }
  }

  private tagging(options: PutOptions): { Tagging?: string } {
    return options.tags && Object.keys(options.tags).length ? { Tagging: new URLSearchParams(options.tags).toString() } : {};
  }

  private contentType(key: string, options: PutOptions): string {
    return options.contentType ?? (key.endsWith('.json') ? 'application/json' : 'application/octet-stream');
  }

  async putFile(key: string, path: string, options: PutOptions & StreamOptions = {}): Promise<boolean> {
    assertStoreKey(key);
    const digest = new ContentDigest(options);
    const file = await open(path, 'r');
    try {
      const size = (await file.stat()).size;
      if (size <= this.config.partBytes) {
        // One part's worth: read whole (bounded by partBytes), checked, then an ordinary PUT.
        const body = Buffer.alloc(size);
        for (let at = 0; at < size; ) {
          const { bytesRead } = await file.read(body, at, size - at, at);
          if (bytesRead === 0) throw new Error(`${path}: the file shrank while it was read (${at} of ${size} bytes)`);
          at += bytesRead;
        }
        digest.update(body);
        digest.check(path);
        return await this.put(key, body, options);
      }
      if (options.ifAbsent && (await this.exists(key))) return false;
      return await this.uploadParts(key, file, size, path, digest, options);
    } finally {
      await file.close();
    }
  }

  private async uploadParts(key: string, file: Awaited<ReturnType<typeof open>>, size: number, path: string, digest: ContentDigest, options: PutOptions): Promise<boolean> {
    const { sdk, client } = await this.connect();
    const partBytes = Math.max(this.config.partBytes, Math.ceil(size / MAX_PARTS / MiB) * MiB);
    const Bucket = this.config.bucket;
    const { UploadId } = await client.send(new sdk.CreateMultipartUploadCommand({ Bucket, Key: key, ContentType: this.contentType(key, options), ...this.tagging(options) }));
    if (!UploadId) throw new Error(`s3://${Bucket}/${key}: CreateMultipartUpload answered no UploadId`);
    const abort = () => client.send(new sdk.AbortMultipartUploadCommand({ Bucket, Key: key, UploadId })).then(() => {}, () => {});
    const parts: { ETag: string; PartNumber: number }[] = [];
    const inFlight = new Set<Promise<void>>();
    let failure: unknown;
    try {
      for (let at = 0, number = 1; at < size; at += partBytes, number++) {
        const length = Math.min(partBytes, size - at);
        const body = Buffer.alloc(length);
        const { bytesRead } = await file.read(body, 0, length, at);
        if (bytesRead !== length) throw new Error(`${path}: the file shrank while it was uploaded (part ${number} read ${bytesRead} of ${length} bytes)`);
        // Parts are read in order, so the digest sees the file front to back while parts upload at once.
        digest.update(body);
        const PartNumber = number;
        const sent: Promise<void> = client.send(new sdk.UploadPartCommand({ Bucket, Key: key, UploadId, PartNumber, Body: body, ContentLength: length })).then(
          (res) => {
            if (!res.ETag) throw new Error(`s3://${Bucket}/${key}: part ${PartNumber} answered no ETag`);
            parts.push({ ETag: res.ETag, PartNumber });
          },
          (err: unknown) => {
            failure ??= err;
          },
        );
        const tracked = sent.finally(() => inFlight.delete(tracked));
        inFlight.add(tracked);
        if (inFlight.size >= PARTS_IN_FLIGHT) await Promise.race(inFlight);
        if (failure) throw failure;
      }
      await Promise.all(inFlight);
      if (failure) throw failure;
      digest.check(path);
    } catch (err) {
      await Promise.allSettled(inFlight);
      await abort();
      throw err;
    }
    parts.sort((a, b) => a.PartNumber - b.PartNumber);
    try {
      await client.send(new sdk.CompleteMultipartUploadCommand({ Bucket, Key: key, UploadId, MultipartUpload: { Parts: parts }, ...(options.ifAbsent ? { IfNoneMatch: '*' } : {}) }));
      return true;
    } catch (err) {
      await abort();
      if (options.ifAbsent && (status(err) === 412 || errorName(err) === 'PreconditionFailed')) return false;
      throw err;
    }
  }

  async getToFile(key: string, path: string, options: StreamOptions = {}): Promise<boolean> {
    const { sdk, client } = await this.connect();
    const digest = new ContentDigest(options);
    let body: Readable | undefined;
    try {
      const res = await client.send(new sdk.GetObjectCommand({ Bucket: this.config.bucket, Key: assertStoreKey(key) }));
      body = res.Body as Readable | undefined;
    } catch (err) {
      if (status(err) === 404 || errorName(err) === 'NoSuchKey') return false;
      throw err;
    }
    try {
      if (body) await pipeline(body, digest.tap(), createWriteStream(path));
      else await writeFile(path, '');
      digest.check(`s3://${this.config.bucket}/${key} (into ${path})`);
    } catch (err) {
      await rm(path, { force: true });
      throw err;
    }
    return true;
  }

  async exists(key: string): Promise<boolean> {
    const { sdk, client } = await this.connect();
    try {
      await client.send(new sdk.HeadObjectCommand({ Bucket: this.config.bucket, Key: assertStoreKey(key) }));
      return true;
    } catch (err) {
      if (status(err) === 404 || errorName(err) === 'NotFound' || errorName(err) === 'NoSuchKey') return false;
      throw err;
    }
  }

  async get(key: string): Promise<Uint8Array | null> {
    const { sdk, client } = await this.connect();
    try {
      const res = await client.send(new sdk.GetObjectCommand({ Bucket: this.config.bucket, Key: assertStoreKey(key) }));
      if (!res.Body) return new Uint8Array();
      return await res.Body.transformToByteArray();
    } catch (err) {
      if (status(err) === 404 || errorName(err) === 'NoSuchKey') return null;
      throw err;
    }
  }

  async list(prefix: string): Promise<string[]> {
    return (await this.listObjects(prefix)).map((o) => o.key);
  }

  async listObjects(prefix: string): Promise<ListedObject[]> {
    // A Map, not an array: keys are counted once even if a server repeated one across pages.
    const objects = new Map<string, Date>();
    await this.pages(prefix, undefined, (page) => {
      for (const object of page.Contents ?? []) if (object.Key !== undefined) objects.set(object.Key, object.LastModified ?? new Date(0));
    });
    return [...objects].map(([key, modifiedAt]) => ({ key, modifiedAt })).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async listChildren(prefix: string): Promise<string[]> {
    if (prefix !== '' && !prefix.endsWith('/')) throw new Error(`invalid store prefix ${JSON.stringify(prefix)}: listChildren needs one that is empty or ends in /`);
    const names = new Set<string>();
    await this.pages(prefix, '/', (page) => {
      for (const p of page.CommonPrefixes ?? []) if (p.Prefix !== undefined) names.add(p.Prefix);
      for (const object of page.Contents ?? []) if (object.Key !== undefined) names.add(object.Key);
    });
    return [...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** Every ListObjectsV2 page under `prefix` (with `delimiter`, S3 rolls what lies below it into CommonPrefixes). */
  private async pages(prefix: string, delimiter: string | undefined, each: (page: ListObjectsV2CommandOutput) => void): Promise<void> {
    assertStorePrefix(prefix);
    const { sdk, client } = await this.connect();
    let token: string | undefined;
    do {
      const page = await client.send(
        new sdk.ListObjectsV2Command({ Bucket: this.config.bucket, Prefix: prefix, Delimiter: delimiter, ContinuationToken: token, MaxKeys: this.config.listPageSize }),
      );
      each(page);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async delete(key: string): Promise<void> {
    const { sdk, client } = await this.connect();
    await client.send(new sdk.DeleteObjectCommand({ Bucket: this.config.bucket, Key: assertStoreKey(key) }));
  }
}
