/** The Api function's adapter: a function-URL event in, hono's answer out, through hono/aws-lambda. */
import { describe, expect, it } from 'vitest';
import { createCloudApiApp, handler, lambdaHandlerFor } from '../../functions/api.ts';

function functionUrlEvent(method: string, path: string) {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: '',
    headers: { host: 'abc.lambda-url.us-east-1.on.aws', 'user-agent': 'vitest' },
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
    isBase64Encoded: false,
  };
}

type LambdaHandler = ReturnType<typeof lambdaHandlerFor>;
/** hono types the result by the event type; the tests read the function-URL result's two fields. */
async function call(h: LambdaHandler | typeof handler, event: ReturnType<typeof functionUrlEvent>) {
  return (await h(event as unknown as Parameters<LambdaHandler>[0])) as unknown as { statusCode: number; body: string };
}

describe('functions/api.ts', () => {
  it('answers a function-URL request through the hono app', async () => {
    const handle = lambdaHandlerFor(createCloudApiApp({ ESOPT_BUCKET: 'esopt-runs-test', AWS_REGION: 'eu-west-1' }));
    const ok = await call(handle, functionUrlEvent('GET', '/healthz'));
    expect(ok.statusCode).toBe(200);
    expect(JSON.parse(ok.body)).toEqual({ ok: true, bucket: 'esopt-runs-test', region: 'eu-west-1' });
    const missing = await call(handle, functionUrlEvent('POST', '/nope'));
    expect(missing.statusCode).toBe(404);
    expect(JSON.parse(missing.body).error.message).toBe('no route POST /nope');
  });

  it('the deployed entry point reads its bucket from the environment, and refuses to start without one', async () => {
    const saved = process.env.ESOPT_BUCKET;
    delete process.env.ESOPT_BUCKET;
    await expect(() => call(handler, functionUrlEvent('GET', '/healthz'))).rejects.toThrow(/ESOPT_BUCKET/);
    process.env.ESOPT_BUCKET = 'esopt-from-env';
    try {
      const res = await call(handler, functionUrlEvent('GET', '/healthz'));
      expect(JSON.parse(res.body).bucket).toBe('esopt-from-env');
    } finally {
      if (saved === undefined) delete process.env.ESOPT_BUCKET;
      else process.env.ESOPT_BUCKET = saved;
    }
  });
});
