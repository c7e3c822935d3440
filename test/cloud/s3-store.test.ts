/**
 * What the contract suite cannot show with a plain s3rver: the S3 adapter's retries on throttling and
 * 5xx, its atomic If-None-Match path (as AWS S3 answers it), and pagination with a repeated key.
 * A proxy in front of the real s3rver answers the chosen requests the way AWS would.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { startLoopbackProxy, type LoopbackProxy } from './helpers/loopback-proxy.ts';

let s3: LocalS3;
const proxies: LoopbackProxy[] = [];
beforeAll(async () => {
  s3 = await startLocalS3('esopt-s3-adapter');
});
afterAll(async () => {
  await Promise.all(proxies.map((p) => p.close()));
  await s3?.close();
});

async function proxied(decide: Parameters<typeof startLoopbackProxy>[1], maxAttempts = 5) {
  const proxy = await startLoopbackProxy(s3.endpoint, decide);
  proxies.push(proxy);
  return { proxy, store: new S3ObjectStore({ ...s3.storeConfig, endpoint: proxy.url, maxAttempts, partBytes: PART }) };
}

const PART = 5 * 1024 * 1024;
const scratch = mkdtempSync(join(tmpdir(), 'esopt-s3-files-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
/** The query parameters of a request the proxy saw, as S3's multipart calls are told apart by them. */
const query = (url: string) => new URL(url, 'http://x').searchParams;

const slowDown = {
  status: 503,
  headers: { 'content-type': 'application/xml' },
  body: '<?xml version="1.0"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>',
};

describe('S3ObjectStore retries', () => {
  it('retries 503 SlowDown and 500 with back-off until the request succeeds', async () => {
    let faults = 0;
    const { proxy, store } = await proxied(() => {
      if (faults >= 3) return null;
      faults++;
      return faults === 2 ? { status: 500, body: '<Error><Code>InternalError</Code></Error>' } : slowDown;
    });
    expect(await store.put('retry/a.json', 'ok')).toBe(true);
    expect(proxy.seen.filter((s) => s.intercepted)).toHaveLength(3);
    expect(proxy.seen.filter((s) => !s.intercepted && s.method === 'PUT')).toHaveLength(1);
    expect(new TextDecoder().decode((await store.get('retry/a.json'))!)).toBe('ok');
  });

  it('gives up after maxAttempts and surfaces the error', async () => {
    const { proxy, store } = await proxied(() => slowDown, 2);
    await expect(store.put('retry/b.json', 'never')).rejects.toMatchObject({ name: 'SlowDown' });
    expect(proxy.seen).toHaveLength(2);
  });
});

describe('S3ObjectStore create-only', () => {
  it('sends If-None-Match: * and reads a 412 as "already there", even when the HEAD check missed it', async () => {
    const direct = new S3ObjectStore(s3.storeConfig);
    await direct.put('cond/key.json', 'first');
    // HEAD answers 404 as if the first write had not landed yet: only the conditional PUT can catch it.
    const { proxy, store } = await proxied(async (req) => {
      if (req.method === 'HEAD') return { status: 404 };
      if (req.method === 'PUT' && req.headers['if-none-match'] === '*' && req.url?.includes('cond/key.json')) {
        return (await direct.exists('cond/key.json'))
          ? { status: 412, body: '<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>' }
          : null;
      }
      return null;
    });
    expect(await store.put('cond/key.json', 'second', { ifAbsent: true })).toBe(false);
    expect(await store.put('cond/other.json', 'fresh', { ifAbsent: true })).toBe(true);
    expect(proxy.seen.filter((s) => s.method === 'PUT').every((s) => s.headers['if-none-match'] === '*')).toBe(true);
    expect(new TextDecoder().decode((await direct.get('cond/key.json'))!)).toBe('first');
  });

  it('retries a 409 ConditionalRequestConflict and then honours the outcome', async () => {
    let conflicts = 0;
    const { store } = await proxied((req) => {
      if (req.method === 'PUT' && conflicts < 2) {
        conflicts++;
        return { status: 409, body: '<Error><Code>ConditionalRequestConflict</Code></Error>' };
      }
      return null;
    });
    expect(await store.put('cond/conflict.json', 'x', { ifAbsent: true })).toBe(true);
    expect(conflicts).toBe(2);
  });
});

describe('S3ObjectStore.list', () => {
  it('follows continuation tokens and returns each key once, sorted, even if a page repeats one', async () => {
    const pages = [['p/a', 'p/c'], ['p/c', 'p/b'], ['p/d']];
    const requested: (string | null)[] = [];
    const { store } = await proxied((req) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method !== 'GET' || url.searchParams.get('list-type') !== '2') return null;
      const token = url.searchParams.get('continuation-token');
      requested.push(token);
      const index = token === null ? 0 : Number(token);
      const last = index === pages.length - 1;
      const contents = pages[index].map((k) => `<Contents><Key>${k}</Key><Size>1</Size></Contents>`).join('');
      return {
        status: 200,
        headers: { 'content-type': 'application/xml' },
        body: `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><Prefix>p/</Prefix><KeyCount>${pages[index].length}</KeyCount>` +
          `<IsTruncated>${!last}</IsTruncated>${last ? '' : `<NextContinuationToken>${index + 1}</NextContinuationToken>`}${contents}</ListBucketResult>`,
      };
    });
    expect(await store.list('p/')).toEqual(['p/a', 'p/b', 'p/c', 'p/d']);
    expect(requested).toEqual([null, '1', '2']);
  });
});

describe('S3ObjectStore.putFile', () => {
  const path = join(scratch, 'three-parts.bin');
  const body = randomBytes(2 * PART + 100);
  writeFileSync(path, body);

  it('sends a file over one part as a multipart upload, create-only completed with If-None-Match', async () => {
    const { proxy, store } = await proxied(() => null);
    expect(await store.putFile('multi/a.bin', path, { ifAbsent: true })).toBe(true);
    const parts = proxy.seen.filter((s) => s.method === 'PUT' && query(s.url).has('partNumber'));
    expect(parts.map((s) => Number(query(s.url).get('partNumber'))).sort()).toEqual([1, 2, 3]);
    expect(parts.map((s) => Number(s.headers['content-length'])).sort((a, b) => a - b)).toEqual([100, PART, PART]);
    const complete = proxy.seen.filter((s) => s.method === 'POST' && query(s.url).has('uploadId'));
    expect(complete).toHaveLength(1);
    expect(complete[0].headers['if-none-match']).toBe('*');
    expect(Buffer.from((await store.get('multi/a.bin'))!).equals(body)).toBe(true);
    // Already there: the HEAD answers it, no upload starts.
    const before = proxy.seen.length;
    expect(await store.putFile('multi/a.bin', path, { ifAbsent: true })).toBe(false);
    expect(proxy.seen.slice(before).map((s) => s.method)).toEqual(['HEAD']);
  });

  it('aborts the upload when a part keeps failing, and stores nothing', async () => {
    const { proxy, store } = await proxied((req) => (req.method === 'PUT' && query(req.url ?? '').get('partNumber') === '2' ? 'slowdown' : null), 2);
    await expect(store.putFile('multi/failed.bin', path)).rejects.toMatchObject({ name: 'SlowDown' });
    expect(proxy.seen.filter((s) => s.method === 'DELETE' && query(s.url).has('uploadId'))).toHaveLength(1);
    expect(proxy.seen.some((s) => s.method === 'POST' && query(s.url).has('uploadId'))).toBe(false);
    expect(await store.get('multi/failed.bin')).toBeNull();
  });

  it('reads a 412 on completing a create-only upload as "already there" (a writer that won meanwhile)', async () => {
    const { store } = await proxied((req) => (req.method === 'POST' && query(req.url ?? '').has('uploadId') ? { status: 412, body: '<Error><Code>PreconditionFailed</Code></Error>' } : null));
    expect(await store.putFile('multi/raced.bin', path, { ifAbsent: true })).toBe(false);
    expect(await store.get('multi/raced.bin')).toBeNull();
  });
});

describe('S3ObjectStore tags', () => {
  it('sends the tags a lifecycle selects by with the PUT (x-amz-tagging), on single and multipart uploads; none when none are given', async () => {
    const { proxy, store } = await proxied(() => null);
    await store.put('tagged/t.json', '{}', { ifAbsent: true, tags: { 'esopt-retention': 'transcript' } });
    await store.put('tagged/plain.json', '{}');
    const puts = proxy.seen.filter((s) => s.method === 'PUT');
    expect(puts.map((s) => [s.url.split('?')[0].split('/').pop(), s.headers['x-amz-tagging'] ?? null])).toEqual([
      ['t.json', 'esopt-retention=transcript'],
      ['plain.json', null],
    ]);
    const path = join(scratch, 'tagged-multi.bin');
    writeFileSync(path, randomBytes(PART + 1));
    await store.putFile('tagged/multi.bin', path, { tags: { a: 'b c' } });
    const create = proxy.seen.filter((s) => s.method === 'POST' && query(s.url).has('uploads'));
    expect(create.map((s) => s.headers['x-amz-tagging'])).toEqual(['a=b+c']);
  });
});
