/**
 * The Episode function's handler with real parts: real sudoku episodes, a real filesystem store, and a
 * real loopback HTTP server speaking the chat-completions protocol where the policy is remote.
 */
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEpisodeHandler, type EpisodeLog } from '../../functions/episode.ts';
import { keys } from '../../shared/keys.ts';
import { RewardRecord } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { sudokuRequests } from './helpers/sudoku-plan.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

let dir: string;
let server: ServerType;
let baseUrl: string;
const seenAuth: (string | undefined)[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'esopt-handler-'));
  // A chat-completions endpoint whose answers depend on the model name: "member-0-0" is told the
  // iteration closed (409), every other model answers an illegal move.
  const app = new Hono();
  app.post('/v1/chat/completions', async (c) => {
    seenAuth.push(c.req.header('authorization'));
    const body = (await c.req.json()) as { model: string };
    if (body.model === 'member-0-0') return c.json({ error: { message: 'iteration 0 has finished' } }, 409);
    return c.json({ choices: [{ message: { content: 'place 9 9 9' } }], usage: { prompt_tokens: 40, completion_tokens: 5 } });
  });
  await new Promise<void>((resolve) => {
    server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve());
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

function recordingLog(): EpisodeLog & { lines: string[] } {
  const lines: string[] = [];
  return { lines, info: (_f, m) => lines.push(`info ${m}`), error: (f, m) => lines.push(`error ${m} ${JSON.stringify(f)}`) };
}

async function readRecord(store: FsObjectStore, key: string) {
  const body = await store.get(key);
  return body === null ? null : RewardRecord.parse(JSON.parse(new TextDecoder().decode(body)));
}

describe('the Episode handler', () => {
  it('plays the episode and writes one RewardRecord under its key; a re-delivery is skipped', async () => {
    const store = new FsObjectStore(join(dir, 'a'));
    const handle = createEpisodeHandler({ prices: measuredPrices(), store, env: {}, memoryMb: 1024, billedPerInvocation: true, log: recordingLog() });
    const [request] = await sudokuRequests({ members: 1, tasks: 1 });
    const first = await handle(request);
    const key = keys.reward(request.run, request.iteration, 0, request.task.id);
    expect(first).toEqual({ ok: true, outcomes: [{ key, written: true, duplicate: false, closed: false, reward: 1, error: null }] });
    const record = await readRecord(store, key);
    expect(record).toMatchObject({ run: request.run, iteration: 0, member: 0, task: request.task.id, reward: 1, error: null });
    expect(record!.steps).toBeGreaterThan(0);
    expect(record!.cost.lambdaGbSeconds).toBeGreaterThan(0);
    expect(record!.cost.usd).toBeGreaterThan(0);
    const again = await handle(request);
    expect(again).toMatchObject({ ok: true, outcomes: [{ key, written: false, duplicate: true }] });
    expect(await readRecord(store, key)).toEqual(record);
  });

  it('runs several episodes of one invocation, one record each', async () => {
    const store = new FsObjectStore(join(dir, 'b'));
    const handle = createEpisodeHandler({ prices: measuredPrices(), store, env: {}, memoryMb: 512, billedPerInvocation: true, log: recordingLog() });
    const requests = await sudokuRequests({ members: 2, tasks: 3, baseUrl: 'scripted:random' });
    const response = await handle({ episodes: requests });
    expect(response.ok).toBe(true);
    if (!response.ok) return;
    expect(response.outcomes.map((o) => o.written)).toEqual(requests.map(() => true));
    expect(await store.list(keys.rewards('cloud-test', 0))).toHaveLength(6);
  });

  it('answers a malformed event with the failing field paths, and logs it', async () => {
    const store = new FsObjectStore(join(dir, 'c'));
    const log = recordingLog();
    const handle = createEpisodeHandler({ prices: measuredPrices(), store, env: {}, memoryMb: 1024, billedPerInvocation: true, log });
    const [request] = await sudokuRequests({ members: 1, tasks: 1 });
    const response = await handle({ ...request, run: '../escape', seed: -1 });
    expect(response.ok).toBe(false);
    if (response.ok) return;
    expect(response.error).toMatch(/^invalid episode event: /);
    expect(response.error).toContain('run');
    expect(response.error).toContain('seed');
    expect(log.lines.some((l) => l.startsWith('error malformed event'))).toBe(true);
    expect(await store.list('')).toEqual([]);
    expect((await handle('not json at all')).ok).toBe(false);
  });

  it('records a failed episode with its error (bad task, missing token, task of another environment)', async () => {
    const store = new FsObjectStore(join(dir, 'd'));
    const handle = createEpisodeHandler({ prices: measuredPrices(), store, env: {}, memoryMb: 1024, billedPerInvocation: true, log: recordingLog() });
    const [request] = await sudokuRequests({ members: 1, tasks: 1 });
    const badTask = { ...request, task: { id: 'bad-task', value: { puzzle: '1234', size: 4 } } };
    const noToken = { ...request, task: { ...request.task, id: 'no-token' }, policy: { ...request.policy, baseUrl, tokenEnv: 'ESOPT_TEST_TOKEN' } };
    const noEnv = { ...request, task: { ...request.task, id: 'no-env' }, environment: { name: 'heuristic' as const, options: {} } };
    const response = await handle({ episodes: [badTask, noToken, noEnv] });
    if (!response.ok) throw new Error(response.error);
    const errors = response.outcomes.map((o) => o.error);
    expect(errors[0]).toMatch(/invalid sudoku task/);
    expect(errors[1]).toMatch(/ESOPT_TEST_TOKEN is not set/);
    // Whether or not heuristic is implemented yet, a sudoku task is no heuristic episode.
    expect(errors[2]).toMatch(/unknown environment "heuristic"|invalid heuristic task/);
    for (const o of response.outcomes) {
      expect(o.written).toBe(true);
      expect((await readRecord(store, o.key))!.error).toBe(o.error);
    }
  });

  it('plays against an HTTP endpoint with the bearer token from the named variable; a 409 ends the episode without a record', async () => {
    const store = new FsObjectStore(join(dir, 'e'));
    const handle = createEpisodeHandler({ prices: measuredPrices(), store, env: { ESOPT_TEST_TOKEN: 's3cret' }, memoryMb: 0, billedPerInvocation: false, log: recordingLog() });
    const requests = await sudokuRequests({ members: 2, tasks: 1, baseUrl, tokenEnv: 'ESOPT_TEST_TOKEN' });
    const response = await handle({ episodes: requests });
    if (!response.ok) throw new Error(response.error);
    const [closed, played] = response.outcomes;
    expect(closed).toMatchObject({ closed: true, written: false });
    expect(closed.error).toMatch(/409/);
    expect(await store.get(closed.key)).toBeNull();
    expect(played).toMatchObject({ written: true, reward: 0, closed: false });
    const record = await readRecord(store, played.key);
    expect(record!.tokens).toEqual({ prompt: 40, completion: 5 });
    // Not billed per invocation (local pool): no GB-seconds without memory, but the GPU share stays.
    expect(record!.cost.lambdaGbSeconds).toBe(0);
    expect(record!.cost.gpuSeconds).toBeGreaterThan(0);
    expect(seenAuth.every((a) => a === 'Bearer s3cret')).toBe(true);
  });

  it('sends the token only to the configured trainer origin', async () => {
    const store = new FsObjectStore(join(dir, 'f'));
    const asked = seenAuth.length;
    const handle = createEpisodeHandler({ prices: measuredPrices(), store, env: { ESOPT_TEST_TOKEN: 's3cret' }, tokenOrigins: ['http://127.0.0.1:1'], memoryMb: 0, billedPerInvocation: false, log: recordingLog() });
    const [request] = await sudokuRequests({ members: 1, tasks: 1, baseUrl, tokenEnv: 'ESOPT_TEST_TOKEN' });
    const response = await handle({ ...request, member: 1 });
    if (!response.ok) throw new Error(response.error);
    expect(response.outcomes[0].error).toMatch(/refusing to send the trainer token to http:\/\/127\.0\.0\.1:\d+/);
    expect(seenAuth.length).toBe(asked);
  });
});
