/**
 * The Api function's adapter: function-URL events in, the esopt API app's answers out, through
 * hono/aws-lambda, over a real s3rver bucket. Reads work; starting a run queues it for the trainer box.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handler, lambdaHandlerFor } from '../../functions/api.ts';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { keys } from '../../shared/keys.ts';
import { QueuedWork, RunConfig } from '../../shared/schemas/index.ts';
import { pushModel } from '../../trainer/training/model-store/push-model.ts';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { functionUrlEvent } from './helpers/function-url-event.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';
import { STACK_CAPS } from './helpers/stack-caps.ts';

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
const TOKEN = 'tok-123-api-lambda-test';
const appOver = (s: S3ObjectStore) => createCloudApp({ ESOPT_BUCKET: s3.bucket, AWS_REGION: 'us-east-1', ESOPT_TOKEN: TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS }, s);

afterAll(async () => {
  store?.destroy();
  await s3?.close();
});

describe('functions/api.ts', () => {
  it('serves the API app from the bucket through function-URL events, bearer-protected', async () => {
    const handle = lambdaHandlerFor(appOver(store));
    const health = await call(handle, functionUrlEvent('GET', '/healthz'));
    expect(health.statusCode).toBe(200);
    expect(JSON.parse(health.body)).toEqual({ ok: true });
    expect((await call(handle, functionUrlEvent('GET', '/runs'))).statusCode).toBe(401);
    const runs = await call(handle, functionUrlEvent('GET', '/runs', { authorization: `Bearer ${TOKEN}` }));
    expect(runs.statusCode).toBe(200);
    expect(JSON.parse(runs.body)).toEqual({ runs: [], next: null });
    expect((await call(handle, functionUrlEvent('GET', '/nope', { authorization: `Bearer ${TOKEN}` }))).statusCode).toBe(404);
  });

  it('queues a run of a pushed model for the trainer box (status requested, one queue entry, the name pinned) and answers 201 with its id', async () => {
    const handle = lambdaHandlerFor(appOver(store));
    const post = (body: string) => call(handle, functionUrlEvent('POST', '/runs', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body));
    // The demo names its base as a directory of the tree: the stack refuses it and points at esopt models push.
    const demo = readFileSync(new URL('../../configs/demo.json', import.meta.url), 'utf8');
    const refused = await post(demo);
    expect(refused.statusCode).toBe(400);
    expect(JSON.parse(refused.body).error.issues).toEqual([{ path: 'model.dir', message: expect.stringContaining('esopt models push') }]);
    const { manifestSha256 } = await pushModel(store, fileURLToPath(new URL('../../models/sudoku-6x6-grid', import.meta.url)), { name: 'sudoku-6x6-grid' });
    const res = await post(JSON.stringify({ ...JSON.parse(demo), model: { name: 'sudoku-6x6-grid' } }));
    expect(res.statusCode).toBe(201);
    const { id } = JSON.parse(res.body) as { id: string };
    const detail = JSON.parse((await call(handle, functionUrlEvent('GET', `/runs/${id}`, { authorization: `Bearer ${TOKEN}` }))).body) as { state: string; completedIterations: number };
    expect(detail).toMatchObject({ state: 'requested', completedIterations: 0 });
    expect(RunConfig.parse(JSON.parse(new TextDecoder().decode((await store.get(keys.config(id)))!))).model).toEqual({ name: 'sudoku-6x6-grid', manifest: manifestSha256 });
    expect(await store.list(keys.workQueue())).toEqual([keys.queuedWork('run', id)]);
    const work = QueuedWork.parse(JSON.parse(new TextDecoder().decode((await store.get(keys.queuedWork('run', id)))!)));
    expect(work).toMatchObject({ kind: 'run', id });
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
