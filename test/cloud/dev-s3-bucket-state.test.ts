/**
 * The dev S3 server keeps s3rver's per-request bucket state (does the bucket exist, its CORS and website
 * configurations) in memory instead of reading it from disk on every request. A cache like that is only
 * right if every change through the S3 API shows at once: these requests would see a stale answer
 * (a bucket that "does not exist", a CORS configuration already deleted) if it were not dropped.
 */
import { CreateBucketCommand, DeleteBucketCorsCommand, GetBucketCorsCommand, HeadBucketCommand, PutBucketCorsCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';

let s3: LocalS3;
let client: S3Client;
beforeAll(async () => {
  s3 = await startLocalS3('esopt-bucket-state');
  client = await new S3ObjectStore(s3.storeConfig).sdkClient();
});
afterAll(async () => {
  client?.destroy();
  await s3?.close();
});

const errorName = (p: Promise<unknown>) => p.then(() => 'no error', (err: Error) => err.name);

describe('dev S3 server: cached bucket state', () => {
  it('sees a CORS configuration put and deleted through the API at once', async () => {
    const Bucket = s3.bucket;
    expect(await errorName(client.send(new GetBucketCorsCommand({ Bucket })))).toBe('NoSuchCORSConfiguration');
    await client.send(new PutBucketCorsCommand({ Bucket, CORSConfiguration: { CORSRules: [{ AllowedMethods: ['GET'], AllowedOrigins: ['http://127.0.0.1'] }] } }));
    const got = await client.send(new GetBucketCorsCommand({ Bucket }));
    expect(got.CORSRules?.[0]?.AllowedOrigins).toEqual(['http://127.0.0.1']);
    await client.send(new DeleteBucketCorsCommand({ Bucket }));
    expect(await errorName(client.send(new GetBucketCorsCommand({ Bucket })))).toBe('NoSuchCORSConfiguration');
  });

  it('sees a bucket created after a request found it missing', async () => {
    const other = new S3ObjectStore({ ...s3.storeConfig, bucket: 'esopt-created-later' });
    try {
      expect(await errorName(client.send(new HeadBucketCommand({ Bucket: 'esopt-created-later' })))).toBe('NotFound');
      await client.send(new CreateBucketCommand({ Bucket: 'esopt-created-later' }));
      await other.put('a/b.json', '{"ok":true}');
      expect(new TextDecoder().decode((await other.get('a/b.json'))!)).toBe('{"ok":true}');
      expect(await other.list('a/')).toEqual(['a/b.json']);
    } finally {
      other.destroy();
    }
  });
});
