/**
 * Load on loopback, bounded in count and time: 500 two-move episodes of 4×4 sudoku at once through the real
 * local fan-out (8 worker processes × 63 concurrent episodes each) and the real inference server (tiny
 * ONNX model, the server's default batching and queue limit). Asserted: every episode's record lands
 * exactly once and none failed, every completion the records account for was a 200 the server counted,
 * the queue never grew past its limit — the overflow got 429 + Retry-After and came back — and the
 * server's heap stayed bounded. Throughput and latency are printed for docs/RELIABILITY.md, not asserted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEnvironment } from '../../environments/index.ts';
import { ask } from '../../shared/es.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { RewardCollector } from '../../trainer/training/loop/reward-collector.ts';
import type { Engine } from '../../trainer/engine/engine.ts';
import { iterationRequests } from '../../trainer/fanout/iteration-requests.ts';
import { LocalFanout } from '../../trainer/fanout/local.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { DEFAULT_BATCHING } from '../../trainer/serving/service.ts';
import { startInferenceServer, type RunningServer } from '../../trainer/serving/server.ts';

const EPISODES = 500;
const MEMBERS = 20;
const BLANKS = 2;
const WORKERS = 8;
const PER_INVOCATION = Math.ceil(EPISODES / WORKERS);
const TOKEN = 'load-token-5e2a9c71d0';
const RUN = 'load';
/** Far below the default (256), so that 500 episodes on two busy cores do hit it. */
const MAX_QUEUE = 16;

let engine: Engine;
let server: RunningServer;
let root: string;
let fanout: LocalFanout;

/** The server's counters, from its own Prometheus text. */
function counters(text: string): { byStatus: Map<string, number>; latency: Array<[number, number]>; completionTokens: number } {
  const byStatus = new Map([...text.matchAll(/^esopt_requests_total\{status="(\d+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]));
  const latency = [...text.matchAll(/^esopt_request_duration_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm)].map((m) => [m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])] as [number, number]);
  const completionTokens = Number(/^esopt_completion_tokens_total (\d+)$/m.exec(text)?.[1] ?? 0);
  return { byStatus, latency, completionTokens };
}

/** The smallest bucket bound holding quantile q of a cumulative histogram. */
function bucketQuantile(buckets: Array<[number, number]>, q: number): number {
  const total = buckets[buckets.length - 1][1];
  return buckets.find(([, n]) => n >= q * total)![0];
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'esopt-load-'));
  // Multi-turn sudoku outgrows the tiny model's context: the engine keeps the newest tokens, as in a run.
  engine = await createEngine({ model: { preset: 'tiny', seed: 0 }, mode: 'lowrank', contextPolicy: 'truncate-left' });
  server = await startInferenceServer(engine, { token: TOKEN, contextPolicy: 'truncate-left', requestTimeoutMs: 120_000, batching: { maxQueue: MAX_QUEUE } });
  server.service.setPopulation({ runSeed: 7, iteration: 0, sigma: 0.05, rank: 1, members: ask({ population: MEMBERS, antithetic: true }) });
  fanout = new LocalFanout({ workers: WORKERS, store: { kind: 'fs', root }, episodesPerInvocation: PER_INVOCATION, env: { LOAD_TOKEN: TOKEN } });
  await fanout.warm();
}, 120_000);

afterAll(async () => {
  await fanout?.close();
  await server?.close();
  await engine?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe(`load: ${EPISODES} concurrent episodes`, () => {
  it('loses no episode and no request, pushes back with 429 + Retry-After at the queue limit, keeps memory bounded', async () => {
    // Two blanks and moves constrained to the action format: every episode plays two moves.
    const sudoku = await loadEnvironment('sudoku');
    const options = { size: 4, blanks: BLANKS, constrainActions: true, shapedReward: true };
    const requests = iterationRequests({
      run: RUN,
      iteration: 0,
      runSeed: 7,
      members: Array.from({ length: MEMBERS }, (_, i) => i),
      tasks: sudoku.sampleTasks('train', EPISODES / MEMBERS, 3, sudoku.optionsSchema.parse(options)),
      environment: { name: 'sudoku', options },
      policy: { baseUrl: `${server.url}/v1`, tokenEnv: 'LOAD_TOKEN' },
      generation: { temperature: 0.7, topP: 1, topK: 0, maxTokens: 16 },
      deadline: new Date(Date.now() + 180_000),
    });
    expect(requests).toHaveLength(EPISODES);

    // Sampled while the load runs: the queue's depth and the server process's memory.
    global.gc?.();
    const heapBefore = process.memoryUsage().heapUsed;
    let maxDepth = 0;
    let maxHeap = heapBefore;
    let maxRss = process.memoryUsage().rss;
    const sampler = setInterval(() => {
      maxDepth = Math.max(maxDepth, server.service.batcher.depth);
      const m = process.memoryUsage();
      maxHeap = Math.max(maxHeap, m.heapUsed);
      maxRss = Math.max(maxRss, m.rss);
    }, 5);

    const started = performance.now();
    const outcomes = await fanout.dispatch(requests, { concurrency: WORKERS, timeoutMs: 180_000 });
    const wallS = (performance.now() - started) / 1000;
    clearInterval(sampler);

    const collected = await new RewardCollector(new FsObjectStore(root), RUN, 0).poll();
    const { byStatus, latency, completionTokens } = counters(server.service.metrics.render());
    const steps = collected.records.reduce((n, r) => n + r.steps, 0);
    global.gc?.();
    const heapAfter = process.memoryUsage().heapUsed;
    const episodeMs = collected.records.map((r) => r.durations.episodeMs).sort((a, b) => a - b);
    // A completion as its episode waited for it: 429s and their Retry-After included.
    const perCompletionMs = collected.records.filter((r) => r.steps > 0).map((r) => r.durations.inferenceMs / r.steps).sort((a, b) => a - b);
    const figures = {
      episodes: EPISODES,
      workers: WORKERS,
      maxQueue: MAX_QUEUE,
      maxBatch: DEFAULT_BATCHING.maxBatch,
      wallS: Number(wallS.toFixed(2)),
      episodesPerS: Number((EPISODES / wallS).toFixed(1)),
      completions200: steps,
      rejected429: byStatus.get('429') ?? 0,
      completionsPerS: Number((steps / wallS).toFixed(1)),
      completionTokensPerS: Math.round(completionTokens / wallS),
      episodeMsP50: Math.round(quantile(episodeMs, 0.5)),
      episodeMsP99: Math.round(quantile(episodeMs, 0.99)),
      completionMsP50: Math.round(quantile(perCompletionMs, 0.5)),
      completionMsP99: Math.round(quantile(perCompletionMs, 0.99)),
      serverSecondsP50AtMost: bucketQuantile(latency, 0.5),
      serverSecondsP99AtMost: bucketQuantile(latency, 0.99),
      maxQueueDepth: maxDepth,
      heapGrowthMb: Number(((heapAfter - heapBefore) / 2 ** 20).toFixed(1)),
      peakHeapGrowthMb: Number(((maxHeap - heapBefore) / 2 ** 20).toFixed(1)),
      peakRssMb: Math.round(maxRss / 2 ** 20),
    };
    console.log(`load figures: ${JSON.stringify(figures)}`);
    // Every episode answered, its record in the store once, none of them an error.
    expect(outcomes.filter((o) => !o.ok || o.error)).toEqual([]);
    expect(collected.records).toHaveLength(EPISODES);
    expect(collected.counted).toBe(EPISODES);
    expect(collected.records.filter((r) => r.error !== null)).toEqual([]);

    // Every completion the episodes used was a 200 the server counted (nothing lost in between, nothing
    // served twice), and the overflow was told to come back rather than queued.
    const completionOfRecords = collected.records.reduce((n, r) => n + r.tokens.completion, 0);
    expect(steps).toBe(EPISODES * BLANKS);
    expect(byStatus.get('200')).toBe(steps);
    expect(completionOfRecords).toBe(completionTokens);
    expect([...byStatus.keys()].sort()).toEqual(byStatus.has('429') ? ['200', '429'] : ['200']);
    expect(byStatus.get('429') ?? 0).toBeGreaterThan(0);
    expect(maxDepth).toBeLessThanOrEqual(MAX_QUEUE);

    // The heap after the load is back near where it started; the peak is bounded by the queue, not the load.
    expect(heapAfter - heapBefore).toBeLessThan(64 * 1024 * 1024);
    expect(maxHeap - heapBefore).toBeLessThan(256 * 1024 * 1024);
  }, 240_000);

  it('answers a burst past the queue limit at once with 429 and a Retry-After in whole seconds, serves the rest', async () => {
    const body = JSON.stringify({ model: 'base', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
    const post = (b: string) => fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: b });
    // A completion forced to 400 tokens keeps the engine busy, so the burst meets a queue that is not being drained.
    const long = post(JSON.stringify({ model: 'base', messages: [{ role: 'user', content: 'hi' }], max_tokens: 480, guided_regex: 'a{400}' }));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const burst = await Promise.all(
      Array.from({ length: 200 }, async () => {
        try {
          const res = await post(body);
          return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as { error?: { code: string } } };
        } catch (err) {
          return { status: 0, retryAfter: null, body: { error: { code: `client: ${(err as Error).message} ${String((err as Error).cause)}` } } };
        }
      }),
    );
    const rejected = burst.filter((r) => r.status === 429);
    expect(burst.filter((r) => r.status !== 200 && r.status !== 429)).toEqual([]);
    expect(rejected.length).toBeGreaterThan(0);
    expect(burst.length - rejected.length).toBeGreaterThanOrEqual(MAX_QUEUE);
    for (const r of rejected) {
      expect(r.retryAfter).toMatch(/^[1-9]\d*$/);
      expect(r.body.error?.code).toBe('queue_full');
    }
    const longReply = await long;
    expect(longReply.status).toBe(200);
    expect(((await longReply.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBeGreaterThanOrEqual(400);
    expect(server.service.batcher.depth).toBe(0);
  }, 60_000);
});
