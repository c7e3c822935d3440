/**
 * The Api function's adapter: function-URL events in, the esopt API app's answers out, through
 * hono/aws-lambda, over a real s3rver bucket. Reads work; starting work is refused with why.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCloudApiApp, handler, lambdaHandlerFor } from '../../functions/api.ts';
import { startLocalS3, type LocalS3 } from '../../functions/dev/s3-server.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';

function functionUrlEvent(method: string, path: string, headers: Record<string, string> = {}, body?: string) {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: '',
    headers: { host: 'abc.lambda-url.us-east-1.on.aws', 'user-agent': 'vitest', ...headers },
    requestContext: {
      accountId: 'anonymous',
      apiId: 'abc',
      domainName: 'abc.lambda-url.us-east-1.on.aws',
      domainPrefix: 'abc',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'vitest' },
      requestId: 'r1',
      routeKey: '$default',
      stage: '$default',
      time: '02/Dec/2026:15:00:00 +0000',
      timeEpoch: 1796223600000,
    },
    ...(body !== undefined ? { body } : {}),
    isBase64Encoded: false,
  };
}

type LambdaHandler = ReturnType<typeof lambdaHandlerFor>;
/** hono types the result by the event type; the tests read the function-URL result's two fields. */
async function call(h: LambdaHandler | typeof handler, event: ReturnType<typeof functionUrlEvent>) {
  return (await h(event as unknown as Parameters<LambdaHandler>[0])) as unknown as { statusCode: number; body: string };
}

let s3: LocalS3;
let store: S3ObjectStore;
beforeAll(async () => {
  s3 = await startLocalS3('esopt-api-lambda');
  store = new S3ObjectStore(s3.storeConfig);
});
afterAll(async () => {
  store?.client.destroy();
  await s3?.close();
});

describe('functions/api.ts', () => {
  it('serves the API app from the bucket through function-URL events, bearer-protected', async () => {
    const handle = lambdaHandlerFor(createCloudApiApp({ store, token: 'tok-123' }));
    const health = await call(handle, functionUrlEvent('GET', '/healthz'));
    expect(health.statusCode).toBe(200);
    expect(JSON.parse(health.body)).toEqual({ ok: true });
    expect((await call(handle, functionUrlEvent('GET', '/runs'))).statusCode).toBe(401);
    const runs = await call(handle, functionUrlEvent('GET', '/runs', { authorization: 'Bearer tok-123' }));
    expect(runs.statusCode).toBe(200);
    expect(JSON.parse(runs.body)).toEqual({ runs: [] });
    expect((await call(handle, functionUrlEvent('GET', '/nope', { authorization: 'Bearer tok-123' }))).statusCode).toBe(404);
  });

  it('refuses to start a run (no trainer behind it) with a clear 409, and records why', async () => {
    const handle = lambdaHandlerFor(createCloudApiApp({ store, token: 'tok-123' }));
    const config = readFileSync(new URL('../../configs/demo.json', import.meta.url), 'utf8');
    const res = await call(handle, functionUrlEvent('POST', '/runs', { authorization: 'Bearer tok-123', 'content-type': 'application/json' }, config));
    expect(res.statusCode).toBe(409);
    expect(res.body).toMatch(/esopt api. on the trainer box/);
    const list = JSON.parse((await call(handle, functionUrlEvent('GET', '/runs', { authorization: 'Bearer tok-123' }))).body) as { runs: { id: string; state: string }[] };
    expect(list.runs).toHaveLength(1);
    expect(list.runs[0].state).toBe('failed');
    const detail = JSON.parse((await call(handle, functionUrlEvent('GET', `/runs/${list.runs[0].id}`, { authorization: 'Bearer tok-123' }))).body) as { status: { error: string } };
    expect(detail.status.error).toMatch(/reads only/);
  });

  it('the deployed entry point reads bucket and token from the environment, and refuses to start without them', async () => {
    const saved = { bucket: process.env.ESOPT_BUCKET, token: process.env.ESOPT_TOKEN };
    delete process.env.ESOPT_BUCKET;
    delete process.env.ESOPT_TOKEN;
    try {
      await expect(() => call(handler, functionUrlEvent('GET', '/healthz'))).rejects.toThrow(/ESOPT_BUCKET[^]*ESOPT_TOKEN|ESOPT_TOKEN[^]*ESOPT_BUCKET/);
    } finally {
      for (const [k, v] of [['ESOPT_BUCKET', saved.bucket], ['ESOPT_TOKEN', saved.token]] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});
