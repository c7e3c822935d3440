/**
 * GET /boxes on the Api app as the Lambda serves it (createCloudApp over s3rver): the boot states the boxes
 * wrote (trainer/cloud/box/box-boot.sh's shape), the trainer first, an unreadable one reported by key, and
 * the route behind the bearer token.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { keys } from '../../shared/keys.ts';
import type { BoxBootState } from '../../shared/schemas/box-boot.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { pino } from 'pino';
import { MemorySecretStore } from '../cloud/helpers/memory-secrets.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const TOKEN = 'boxes-test-token-0123456789';
let s3: LocalS3;
let store: S3ObjectStore;

const state = (over: Partial<BoxBootState>): BoxBootState => ({
  box: 'trainer',
  step: 'ready',
  status: 'ready',
  at: '2026-12-05T01:00:00.000Z',
  artifactSha256: 'a'.repeat(64),
  log: ['box boot: step service', 'box boot: ready (esopt-trainer-box)'],
  ...over,
});

beforeAll(async () => {
  s3 = await startLocalS3('esopt-boxes');
  store = new S3ObjectStore(s3.storeConfig);
  await store.put(keys.boxBoot('replica-2'), JSON.stringify(state({ box: 'replica-2', step: 'token', status: 'failed', error: 'step token failed (exit 1): aws ssm get-parameter …', log: ['ParameterNotFound'] })));
  await store.put(keys.boxBoot('replica-1'), JSON.stringify(state({ box: 'replica-1', step: 'dependencies', status: 'running' })));
  await store.put(keys.boxBoot('trainer'), JSON.stringify(state({})));
  await store.put(keys.boxBoot('replica-3'), '{"box":');
});

afterAll(async () => {
  store?.destroy();
  await s3?.close();
});

describe('GET /boxes', () => {
  it("answers every box's recorded boot state, the trainer first, and names what does not parse", async () => {
    const app = createCloudApp({ ESOPT_BUCKET: s3.bucket, ESOPT_TOKEN: TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()) }, store, pino({ level: 'silent' }), new MemorySecretStore());
    const res = await app.request('/boxes', { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { boxes: BoxBootState[]; unreadable: { key: string; error: string }[] };
    expect(body.boxes.map((b) => [b.box, b.status, b.step])).toEqual([
      ['trainer', 'ready', 'ready'],
      ['replica-1', 'running', 'dependencies'],
      ['replica-2', 'failed', 'token'],
    ]);
    expect(body.boxes[2].error).toMatch(/^step token failed/);
    expect(body.unreadable).toEqual([{ key: 'boxes/replica-3/boot.json', error: expect.stringMatching(/^not JSON/) }]);
    expect((await app.request('/boxes')).status).toBe(401);
    // In the OpenAPI document, bearer-protected.
    const doc = (await (await app.request('/openapi.json')).json()) as { paths: Record<string, { get?: { security?: unknown } }> };
    expect(doc.paths['/boxes']?.get?.security).toEqual([{ bearer: [] }]);
  });
});
