/**
 * The local pool: real child processes running the Episode handler, writing to a real store; timeouts
 * and cancellation kill the worker, and the pool recovers.
 */
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { RewardCollector } from '../../trainer/training/loop/reward-collector.ts';
import { LocalFanout } from '../../trainer/fanout/local.ts';
import { sudokuRequests } from './helpers/sudoku-plan.ts';

let dir: string;
let hang: ServerType;
let hangUrl: string;
let fanout: LocalFanout | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'esopt-local-fanout-'));
  // An inference endpoint that never answers: only a kill ends an episode waiting on it.
  const app = new Hono();
  app.post('/v1/chat/completions', () => new Promise<Response>(() => {}));
  await new Promise<void>((resolve) => {
    hang = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve());
  });
  hangUrl = `http://127.0.0.1:${(hang.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  await fanout?.close();
  (hang as unknown as import('node:http').Server | undefined)?.closeAllConnections();
  await new Promise((resolve) => hang?.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

describe('LocalFanout', () => {
  it('runs every request in worker processes; the rewards land in the store, once per (member, task)', async () => {
    const root = join(dir, 'ok');
    fanout = new LocalFanout({ workers: 2, store: { kind: 'fs', root }, episodesPerInvocation: 2 });
    const requests = await sudokuRequests({ run: 'local', members: 3, tasks: 3 });
    const outcomes = await fanout.dispatch(requests, { concurrency: 2, timeoutMs: 30_000 });
    expect(outcomes.map((o) => o.request)).toEqual(requests);
    expect(outcomes.every((o) => o.ok && o.error === undefined)).toBe(true);
    // Dispatching the same iteration again is harmless: nothing new is written, nothing counts twice.
    const again = await fanout.dispatch(requests, { concurrency: 2, timeoutMs: 30_000 });
    expect(again.every((o) => o.ok)).toBe(true);
    const got = await new RewardCollector(new FsObjectStore(root), 'local', 0).poll();
    expect(got.records).toHaveLength(9);
    expect(got.counted).toBe(9);
    expect(got.records.every((r) => r.reward === 1)).toBe(true);
  });

  it('kills a worker whose episode outlives the timeout, and keeps serving', async () => {
    const root = join(dir, 'timeout');
    await fanout?.close();
    fanout = new LocalFanout({ workers: 1, store: { kind: 'fs', root } });
    const [stuck] = await sudokuRequests({ run: 'timeout', members: 1, tasks: 1, baseUrl: hangUrl });
    const [fine] = await sudokuRequests({ run: 'timeout', iteration: 1, members: 1, tasks: 1 });
    const [outcome] = await fanout.dispatch([stuck], { concurrency: 1, timeoutMs: 1500 });
    expect(outcome).toMatchObject({ ok: false, error: expect.stringMatching(/timed out after 1500 ms/) });
    const [next] = await fanout.dispatch([fine], { concurrency: 1, timeoutMs: 30_000 });
    expect(next.ok).toBe(true);
  });

  it('cancels: an aborted dispatch kills busy workers and skips the rest', async () => {
    const root = join(dir, 'cancel');
    await fanout?.close();
    fanout = new LocalFanout({ workers: 1, store: { kind: 'fs', root } });
    const stuck = await sudokuRequests({ run: 'cancel', members: 3, tasks: 1, baseUrl: hangUrl });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 1500);
    const outcomes = await fanout.dispatch(stuck, { concurrency: 1, timeoutMs: 60_000, signal: controller.signal });
    expect(outcomes.map((o) => o.error)).toEqual(['cancelled: the worker was killed', 'cancelled before it started', 'cancelled before it started']);
    expect(await new FsObjectStore(root).list('')).toEqual([]);
  });

  it('cancels a worker that is still starting up', async () => {
    await fanout?.close();
    fanout = new LocalFanout({ workers: 1, store: { kind: 'fs', root: join(dir, 'cancel-early') } });
    const requests = await sudokuRequests({ run: 'cancel-early', members: 2, tasks: 1 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    const outcomes = await fanout.dispatch(requests, { concurrency: 1, timeoutMs: 60_000, signal: controller.signal });
    expect(outcomes.map((o) => o.error)).toEqual(['cancelled: the worker was killed', 'cancelled before it started']);
  });
});
