/**
 * S3 misbehaving under a whole iteration's traffic: a fault proxy on loopback in front of s3rver answers
 * bursts of 503 SlowDown and resets connections, before a request reaches s3rver and after s3rver has
 * applied it (the reply lost). The Episode handlers (behind the Lambda adapter and the dev invoke
 * endpoint) write their records through it and the trainer's collector reads them through it; the S3
 * adapter's SDK retries must ride through every fault, and the collected rewards must be exactly those of
 * a fault-free reference iteration with the same seeds: nothing lost, nothing counted twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEpisodeHandler } from '../../functions/episode.ts';
import { startInvokeEndpoint, type InvokeEndpoint } from '../../trainer/dev/local-cloud/invoke-endpoint.ts';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { RewardCollector } from '../../trainer/training/loop/reward-collector.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { LambdaFanout } from '../../trainer/fanout/lambda.ts';
import { sudokuRequests } from '../cloud/helpers/sudoku-plan.ts';
import { startLoopbackProxy, type Fault, type LoopbackProxy } from '../cloud/helpers/loopback-proxy.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const MEMBERS = 4;
const TASKS = 5;
const quiet = { info() {}, error() {} };
let s3: LocalS3;
let proxy: LoopbackProxy;
const endpoints: InvokeEndpoint[] = [];

/**
 * Per 20 requests: a burst of three SlowDowns, a reset before the server, a reset after it (a quarter of
 * all requests). Much more and the SDK's client-side retry quota (500 tokens, 5 a throttle, 10 a reset)
 * runs dry and it stops retrying, which is the SDK's design, not a fault to ride through.
 */
const plan = (n: number): Fault | null => {
  const i = n % 20;
  return i >= 1 && i <= 3 ? 'slowdown' : i === 7 ? 'reset-before' : i === 13 ? 'reset-after' : null;
};

beforeAll(async () => {
  s3 = await startLocalS3('esopt-s3-faults');
  proxy = await startLoopbackProxy(s3.endpoint, (_, n) => plan(n));
});
afterAll(async () => {
  await Promise.all(endpoints.map((e) => e.close()));
  await proxy?.close();
  await s3?.close();
});

/** One iteration's episodes through the Lambda adapter, the handlers and the collector each with their own client from `open`. */
async function iteration(run: string, open: () => S3ObjectStore) {
  const store = open();
  const endpoint = await startInvokeEndpoint({ Episode: createEpisodeHandler({ prices: measuredPrices(), store: open(), env: {}, memoryMb: 1024, billedPerInvocation: true, log: quiet }) });
  endpoints.push(endpoint);
  const fanout = new LambdaFanout({ functionName: 'Episode', endpoint: endpoint.url, credentials: { accessKeyId: 'dev', secretAccessKey: 'dev' }, backoffBaseMs: 5, backoffMaxMs: 50 });
  const requests = await sudokuRequests({ run, members: MEMBERS, tasks: TASKS, baseUrl: 'scripted:random' });
  const outcomes = await fanout.dispatch(requests, { concurrency: 8, timeoutMs: 20_000 });
  await endpoint.drained();
  await fanout.close();
  const collected = await new RewardCollector(store, run, 0).poll();
  return { outcomes, collected, endpoint };
}

describe('S3 503 SlowDown bursts and connection resets', () => {
  it('the SDK retries ride through them all: the collected rewards are the fault-free iteration’s', async () => {
    const reference = await iteration('s3-reference', () => new S3ObjectStore(s3.storeConfig));
    // Three SlowDowns in a row, then a reset, may hit one request: give it room (AWS's default is 3).
    const faulty = await iteration('s3-faulty', () => new S3ObjectStore({ ...s3.storeConfig, endpoint: proxy.url, maxAttempts: 8 }));

    expect(reference.collected.records).toHaveLength(MEMBERS * TASKS);
    expect(faulty.outcomes.every((o) => o.ok)).toBe(true);
    expect(faulty.endpoint.stats.handlerErrors).toBe(0);
    const rewards = (c: typeof faulty.collected) => c.records.map((r) => ({ member: r.member, task: r.task, reward: r.reward, error: r.error }));
    expect(rewards(faulty.collected)).toEqual(rewards(reference.collected));
    expect(faulty.collected).toMatchObject({ counted: MEMBERS * TASKS, failed: 0, duplicatesIgnored: 0, invalid: [] });
    // What the bucket itself holds, read around the proxy: one object per (member, task), no strays.
    expect(await new S3ObjectStore(s3.storeConfig).list('runs/s3-faulty/')).toHaveLength(MEMBERS * TASKS);

    const { slowdown, 'reset-before': before, 'reset-after': after } = proxy.injected;
    expect(slowdown).toBeGreaterThanOrEqual(3 * 4);
    expect(before).toBeGreaterThanOrEqual(4);
    expect(after).toBeGreaterThanOrEqual(4);
    const lost = MEMBERS * TASKS - faulty.collected.counted;
    console.info(`[reliability] S3 faults: ${proxy.seen.length} requests through the proxy, ${slowdown} SlowDown, ${before} resets before s3rver, ${after} resets after it; ${faulty.collected.counted}/${MEMBERS * TASKS} rewards collected, ${lost} lost, 0 twice`);
    expect(lost).toBe(0);
  });
});
