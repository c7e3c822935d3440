/**
 * The Lambda adapter end to end on one machine: @aws-sdk/client-lambda → the dev invoke endpoint
 * (throttling, 5xx, slow and duplicated deliveries) → the real Episode handler → the S3 adapter →
 * s3rver → the reward collector. Duplicates must be harmless all the way through.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEpisodeHandler } from '../../functions/episode.ts';
import { startInvokeEndpoint, type InvokeEndpoint } from '../../trainer/dev/local-cloud/invoke-endpoint.ts';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { RewardCollector } from '../../trainer/training/loop/reward-collector.ts';
import { LambdaFanout } from '../../trainer/fanout/lambda.ts';
import { sudokuRequests } from './helpers/sudoku-plan.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const quiet = { info() {}, error() {} };
let s3: LocalS3;
let store: S3ObjectStore;
const endpoints: InvokeEndpoint[] = [];
const fanouts: LambdaFanout[] = [];

beforeAll(async () => {
  s3 = await startLocalS3('esopt-lambda-test');
  store = new S3ObjectStore(s3.storeConfig);
});
afterAll(async () => {
  await Promise.all(fanouts.map((f) => f.close()));
  await Promise.all(endpoints.map((e) => e.close()));
  await s3?.close();
});

async function setup(faults: Parameters<typeof startInvokeEndpoint>[1], fanoutOptions: Partial<ConstructorParameters<typeof LambdaFanout>[0]> = {}) {
  const handle = createEpisodeHandler({ prices: measuredPrices(), store, env: {}, memoryMb: 1024, billedPerInvocation: true, log: quiet });
  const endpoint = await startInvokeEndpoint({ Episode: handle }, faults);
  endpoints.push(endpoint);
  const fanout = new LambdaFanout({
    functionName: 'Episode',
    endpoint: endpoint.url,
    credentials: { accessKeyId: 'dev', secretAccessKey: 'dev' },
    backoffBaseMs: 5,
    backoffMaxMs: 50,
    ...fanoutOptions,
  });
  fanouts.push(fanout);
  return { endpoint, fanout };
}

describe('LambdaFanout against the dev invoke endpoint', () => {
  it('Event invokes through throttles, 5xx and duplicate deliveries: each (member, task) counted once', async () => {
    const { endpoint, fanout } = await setup({
      throttleRate: 0.25,
      errorRate: 0.15,
      duplicateRate: 0.5,
      latency: { kind: 'uniform', minMs: 0, maxMs: 30 },
      seed: 11,
    });
    const requests = await sudokuRequests({ run: 'lambda-event', members: 4, tasks: 5 });
    const outcomes = await fanout.dispatch(requests, { concurrency: 8, timeoutMs: 10_000 });
    expect(outcomes.every((o) => o.ok)).toBe(true);
    await endpoint.drained();
    const got = await new RewardCollector(store, 'lambda-event', 0).until(20, { deadline: Date.now() + 10_000 });
    expect(got.complete).toBe(true);
    expect(got.records).toHaveLength(20);
    expect(got.counted).toBe(20);
    expect(got.records.every((r) => r.reward === 1)).toBe(true);
    // The faults really happened, and were absorbed.
    expect(endpoint.stats.throttled).toBeGreaterThan(0);
    expect(endpoint.stats.serverErrors).toBeGreaterThan(0);
    expect(endpoint.stats.duplicateDeliveries).toBeGreaterThan(0);
    expect(fanout.stats.throttles).toBe(endpoint.stats.throttled);
    expect(fanout.stats.serverErrors).toBe(endpoint.stats.serverErrors);
    expect(endpoint.stats.deliveries).toBe(20 + endpoint.stats.duplicateDeliveries);
    expect((await store.list('runs/lambda-event/')).length).toBe(20);
  });

  it('RequestResponse with several episodes per invocation reads the outcomes back; a re-run is all duplicates', async () => {
    const { endpoint, fanout } = await setup({ throttleRate: 0.2, seed: 5 }, { invocationType: 'RequestResponse', episodesPerInvocation: 3 });
    const requests = await sudokuRequests({ run: 'lambda-sync', members: 2, tasks: 4, baseUrl: 'scripted:random' });
    const outcomes = await fanout.dispatch(requests, { concurrency: 2, timeoutMs: 10_000 });
    expect(outcomes.map((o) => o.request)).toEqual(requests);
    expect(outcomes.every((o) => o.ok)).toBe(true);
    expect(endpoint.stats.accepted).toBe(3);
    const before = await new RewardCollector(store, 'lambda-sync', 0).poll();
    expect(before.records).toHaveLength(8);
    await fanout.dispatch(requests, { concurrency: 2, timeoutMs: 10_000 });
    const after = await new RewardCollector(store, 'lambda-sync', 0).poll();
    expect(after.records).toEqual(before.records);
  });

  it('gives up on a function that throttles every call, with the reason', async () => {
    const { fanout } = await setup({ throttleRate: 1 }, { retries: 3 });
    const requests = await sudokuRequests({ run: 'lambda-throttled', members: 1, tasks: 1 });
    const [outcome] = await fanout.dispatch(requests, { concurrency: 1, timeoutMs: 5_000 });
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toMatch(/gave up after 4 attempts: TooManyRequestsException/);
    expect(fanout.stats.throttles).toBe(4);
  });

  it('answers a malformed event with a clear error instead of failing the function', async () => {
    const { endpoint } = await setup({});
    const res = await fetch(`${endpoint.url}/2015-03-31/functions/Episode/invocations`, {
      method: 'POST',
      headers: { 'x-amz-invocation-type': 'RequestResponse' },
      body: JSON.stringify({ run: 'x', iteration: -1 }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-amz-function-error')).toBeNull();
    const body = (await res.json()) as { ok: boolean; error: string };
    expect(body.ok).toBe(false);
    expect(body.error).toMatch(/invalid episode event: .*iteration/);
    const notJson = await fetch(`${endpoint.url}/2015-03-31/functions/Episode/invocations`, { method: 'POST', body: '{' });
    expect(notJson.status).toBe(400);
  });
});

describe('LambdaFanout and slow deliveries', () => {
  it('a RequestResponse invoke that outlives its timeout is retried; the function still ran, and its record exists once', async () => {
    const { endpoint, fanout } = await setup({ latency: { kind: 'fixed', ms: 700 } }, { invocationType: 'RequestResponse', retries: 1 });
    const requests = await sudokuRequests({ run: 'lambda-slow', members: 1, tasks: 1 });
    const [outcome] = await fanout.dispatch(requests, { concurrency: 1, timeoutMs: 200 });
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toMatch(/gave up after 2 attempts: invoke timed out after 200 ms/);
    // Both deliveries run to the end on the function's side: one writes, the other finds the record.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(endpoint.stats.deliveries).toBe(2);
    const got = await new RewardCollector(store, 'lambda-slow', 0).poll();
    expect(got.records).toHaveLength(1);
    expect(got.counted).toBe(1);
  });
});
