/**
 * Rate limits per token: the deployed app answers 429 with Retry-After once a token passes its burst, and
 * goes on answering /healthz; each token has its own bucket, which refills at `perSecond`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import { pino } from 'pino';
import { afterAll, expect, it } from 'vitest';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { rateLimit } from '../../functions/http-api/rate-limit.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { MemorySecretStore } from '../cloud/helpers/memory-secrets.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const TOKEN = 'rate-limit-test-token-0123456789';
const root = mkdtempSync(join(tmpdir(), 'esopt-rate-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

it('the deployed app refuses a token past its burst with 429 and Retry-After, and /healthz still answers', async () => {
  const env = { ESOPT_BUCKET: 'bucket', AWS_REGION: 'us-east-1', ESOPT_TOKEN: TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ESOPT_API_RATE_PER_SECOND: '0.01', ESOPT_API_RATE_BURST: '4' };
  const app = createCloudApp(env, new FsObjectStore(root), pino({ level: 'silent' }), new MemorySecretStore());
  const auth = { authorization: `Bearer ${TOKEN}` };
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push((await app.request('/runs', { headers: auth })).status);
  expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
  const limited = await app.request('/runs', { headers: auth });
  expect(limited.status).toBe(429);
  expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(await limited.json()).toMatchObject({ error: { code: 'rate_limited' } });
  for (let i = 0; i < 10; i++) expect((await app.request('/healthz')).status).toBe(200);
});

it('keeps one bucket per caller, refilled at perSecond', async () => {
  let now = 0;
  const app = new Hono();
  // The caller as bearerAuth would hand it on; here a header names it.
  app.use('*', rateLimit({ perSecond: 2, burst: 2 }, () => now, (c) => c.req.header('x-caller') ?? null));
  app.get('*', (c) => c.text('ok'));
  const as = async (caller: string) => (await app.request('/x', { headers: { 'x-caller': caller } })).status;
  expect([await as('a'), await as('a'), await as('a')]).toEqual([200, 200, 429]);
  // Another token is not held back by the first.
  expect([await as('b'), await as('b')]).toEqual([200, 200]);
  now += 500;
  expect([await as('a'), await as('a')]).toEqual([200, 429]);
  now += 1000;
  expect([await as('a'), await as('a'), await as('a')]).toEqual([200, 200, 429]);
});
