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
 * The SDK is imported on the first request, not with this file: the fs-store paths (the local worker
 * pool, `esopt start`) import this file for its config schema and never pay for loading the SDK.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { z } from 'zod';
import type { ObjectStore, PutOptions } from '../ports/object-store.ts';
import { DEFAULT_AWS_REGION } from './aws-region.ts';
import { assertStoreKey, assertStorePrefix } from './store-key.ts';

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
      ContentType: options.contentType ?? (key.endsWith('.json') ? 'application/json' : 'application/octet-stream'),
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
    assertStorePrefix(prefix);
    const { sdk, client } = await this.connect();
    // A Set, not an array: keys are counted once even if a server repeated one across pages.
    const keys = new Set<string>();
    let token: string | undefined;
    do {
      const page = await client.send(
        new sdk.ListObjectsV2Command({ Bucket: this.config.bucket, Prefix: prefix, ContinuationToken: token, MaxKeys: this.config.listPageSize }),
      );
      for (const object of page.Contents ?? []) if (object.Key !== undefined) keys.add(object.Key);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return [...keys].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  async delete(key: string): Promise<void> {
    const { sdk, client } = await this.connect();
    await client.send(new sdk.DeleteObjectCommand({ Bucket: this.config.bucket, Key: assertStoreKey(key) }));
  }
}
