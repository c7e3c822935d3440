/**
 * A real S3-compatible server (s3rver) on a random loopback port, for tests and `esopt dev cloud`.
 * Its data lives in a fresh temporary directory that `close()` removes. s3rver ignores
 * `If-None-Match` on PUT, which is exactly the server the S3 adapter's second line of defence is for.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { S3StoreConfig } from '../../shared/store/s3.ts';

export interface LocalS3 {
  endpoint: string;
  bucket: string;
  /** Ready to hand to `new S3ObjectStore(...)`. */
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
  const address = await server.run();
  const endpoint = `http://127.0.0.1:${address.port}`;
  return {
    endpoint,
    bucket,
    storeConfig: {
      bucket,
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      maxAttempts: 5,
      maxSockets: 50,
      retryMode: 'standard',
      // s3rver checks signatures against its fixed development key pair.
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    },
    async close() {
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
