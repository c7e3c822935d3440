/**
 * A real S3-compatible server (s3rver) on a random loopback port, for tests and `esopt dev cloud`.
 * Its data lives in a fresh temporary directory that `close()` removes. s3rver ignores
 * `If-None-Match` on PUT, which is exactly the server the S3 adapter's second line of defence is for.
 *
 * s3rver also writes an object in place (open with truncation, then write), where S3 replaces an object
 * whole. Two PUTs of one key at once can then leave the shorter body followed by the longer one's tail,
 * an object neither wrote (two racing deliveries of one episode did: a record that does not parse, a
 * reward lost), and a GET during a PUT reads an empty body. So clients reach s3rver through a small
 * front on loopback that runs the requests for one object one at a time: each object is replaced whole,
 * as on S3, and If-None-Match stays ignored.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
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
  const front = await startPerObjectFront(`http://127.0.0.1:${address.port}`);
  const endpoint = front.url;
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
      await front.close();
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}

/**
 * Forwards every request to `upstream`; those naming one object (`/bucket/key…`, path-style) run one at
 * a time per object, each until its response has been read to the end. Listings and bucket requests
 * pass at once.
 */
async function startPerObjectFront(upstream: string): Promise<{ url: string; close(): Promise<void> }> {
  const target = new URL(upstream);
  const tails = new Map<string, Promise<void>>();
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://front').pathname;
    const forward = () =>
      new Promise<void>((done) => {
        const up = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          answer.on('end', done);
          answer.on('error', () => done());
          // A client that hangs up early must not hold the object's queue.
          res.on('close', done);
        });
        up.on('error', (err) => {
          if (!res.headersSent) res.writeHead(502);
          res.end(err.message);
          done();
        });
        req.pipe(up);
      });
    // `/bucket` or `/bucket/`: not one object.
    if (!/^\/[^/]+\/./.test(path)) return void forward();
    const run = (tails.get(path) ?? Promise.resolve()).then(forward);
    tails.set(path, run);
    void run.then(() => {
      if (tails.get(path) === run) tails.delete(path);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
