/**
 * `esopt cloud status` against a stack on loopback: s3rver holding recorded boot states and the trainer's
 * published certificate, the Api app (createCloudApp) over HTTP, a TLS "trainer box" answering /healthz with
 * that certificate, and the Episode handler behind the local Lambda Invoke endpoint. The stack is named by
 * an outputs file as `sst deploy` writes it; a box that failed, a trainer behind another certificate, and
 * missing outputs are reported.
 */
import { serve, type ServerType } from '@hono/node-server';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEpisodeHandler } from '../../functions/episode.ts';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { startInvokeEndpoint, type InvokeEndpoint } from '../../trainer/dev/local-cloud/invoke-endpoint.ts';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { keys } from '../../shared/keys.ts';
import type { BoxBootState } from '../../shared/schemas/box-boot.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { command } from '../../trainer/cli/commands/cloud-status.ts';
import { createTlsIdentity, publishCertificate, type TlsIdentity } from '../../trainer/serving/tls-identity.ts';
import { MemorySecretStore } from '../cloud/helpers/memory-secrets.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const TOKEN = 'status-test-token-0123456789';
let s3: LocalS3;
let store: S3ObjectStore;
let api: ServerType;
let trainer: Server;
let identity: TlsIdentity;
let lambda: InvokeEndpoint;
let outputs: string;
const saved = { ...process.env };
const dir = mkdtempSync(join(tmpdir(), 'esopt-cloud-status-'));

const boot = (over: Partial<BoxBootState>): string =>
  JSON.stringify({ box: 'trainer', step: 'ready', status: 'ready', at: '2026-12-05T01:00:00.000Z', artifactSha256: 'a'.repeat(64), log: ['box boot: ready'], ...over });

async function status(...argv: string[]) {
  const out: string[] = [];
  const code = await command.run(argv, { stdout: (t) => out.push(t), stderr: () => {}, readStdin: async () => '' });
  return { code, text: out.join('\n') };
}

beforeAll(async () => {
  s3 = await startLocalS3('esopt-status');
  store = new S3ObjectStore(s3.storeConfig);
  await store.put(keys.boxBoot('trainer'), boot({}));
  const app = createCloudApp({ ESOPT_BUCKET: s3.bucket, ESOPT_TOKEN: TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()) }, store, pino({ level: 'silent' }), new MemorySecretStore());
  api = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  identity = await createTlsIdentity(['127.0.0.1']);
  await publishCertificate(store, identity);
  trainer = createServer({ key: identity.key, cert: identity.cert }, (req, res) => {
    res.writeHead(req.url === '/healthz' ? 200 : 401, { 'content-type': 'application/json' });
    res.end(req.url === '/healthz' ? '{"ok":true,"mode":"lowrank"}' : '{}');
  });
  await new Promise<void>((resolve) => trainer.listen(0, '127.0.0.1', resolve));
  lambda = await startInvokeEndpoint({ 'esopt-test-Episode': createEpisodeHandler({ prices: measuredPrices(), store, env: {}, memoryMb: 0, billedPerInvocation: false }) });
  Object.assign(process.env, { AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_ENDPOINT_URL_LAMBDA: lambda.url, AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1' });
  outputs = join(dir, 'outputs.json');
  writeFileSync(
    outputs,
    JSON.stringify({
      bucket: s3.bucket,
      apiUrl: `http://127.0.0.1:${(api.address() as AddressInfo).port}/`,
      trainerUrl: `https://127.0.0.1:${(trainer.address() as AddressInfo).port}/v1`,
      episodeFunction: 'esopt-test-Episode',
      replicaUrls: [],
      artifactSha256: 'a'.repeat(64),
      trainerInstance: 'i-0123',
    }),
  );
}, 60_000);

afterAll(async () => {
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
  Object.assign(process.env, saved);
  store?.destroy();
  await Promise.all([s3?.close(), lambda?.close(), new Promise((r) => api?.close(r)), new Promise((r) => trainer?.close(r))]);
});

describe('esopt cloud status', () => {
  it('reads the outputs `sst deploy` wrote: the trainer box ready, the Api, the pinned trainer and the Episode function answering', async () => {
    const { code, text } = await status('--outputs', outputs, '--json');
    const s = JSON.parse(text);
    expect(s.healthy).toBe(true);
    expect(code).toBe(0);
    expect(s.boxes.boxes.map((b: BoxBootState) => [b.box, b.status])).toEqual([['trainer', 'ready']]);
    expect(s.api).toEqual({ ok: true, detail: 'GET /healthz: 200 {"ok":true}' });
    expect(s.trainer).toMatchObject({ ok: true, certificateSha256: identity.sha256, detail: 'GET /healthz (pinned): 200 {"ok":true,"mode":"lowrank"}' });
    expect(s.episodeFunction).toMatchObject({ ok: true, name: 'esopt-test-Episode' });
    // The ping reached the real handler, which refused it without playing anything.
    expect(lambda.stats.calls).toBeGreaterThanOrEqual(1);
    const human = await status('--outputs', outputs);
    expect(human.text).toContain('box trainer: ready since 2026-12-05T01:00:00.000Z');
    expect(human.text).toMatch(/^trainer inference https:\/\/127\.0\.0\.1:\d+\/healthz: ok GET \/healthz \(pinned\): 200/m);
  });

  it('shows a failed box with its step, error and log tail, and a trainer that presents another certificate, and exits 1', async () => {
    await store.put(keys.boxBoot('replica-1'), boot({ box: 'replica-1', step: 'dependencies', status: 'failed', error: 'step dependencies failed (exit 1): npm ci', log: ['npm error network ETIMEDOUT'], artifactSha256: 'b'.repeat(64) }));
    // Another box's certificate in the bucket: the running server no longer matches the pin.
    await publishCertificate(store, await createTlsIdentity(['127.0.0.1']));
    try {
      const { code, text } = await status('--outputs', outputs);
      expect(code).toBe(1);
      expect(text).toContain(`box replica-1: failed at step dependencies since 2026-12-05T01:00:00.000Z (booted artifact bbbbbbbbbbbb, deployed aaaaaaaaaaaa)\n  step dependencies failed (exit 1): npm ci\n  | npm error network ETIMEDOUT`);
      expect(text).toMatch(/trainer inference .*: FAILED GET \/healthz \(pinned\): fetch failed: the server's certificate is not the pinned /);
    } finally {
      await store.delete(keys.boxBoot('replica-1'));
      await publishCertificate(store, identity);
    }
  });

  it('takes the stack from flags; without outputs or --bucket it says how to name the stack', async () => {
    await expect(status('--outputs', join(dir, 'none.json'))).rejects.toThrow(/--outputs .*none\.json: ENOENT/);
    const bare = await status('--bucket', s3.bucket, '--json', '--outputs', outputs, '--api-url', 'http://127.0.0.1:1/');
    expect(JSON.parse(bare.text).api).toMatchObject({ ok: false, detail: expect.stringMatching(/^GET \/healthz: fetch failed/) });
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      await expect(status()).rejects.toThrow(/no bucket: deploy with `sst deploy` \(it writes \.sst\/outputs\.json\) or pass --bucket/);
      const flagsOnly = JSON.parse((await status('--bucket', s3.bucket, '--json')).text);
      expect(flagsOnly).toMatchObject({ bucket: s3.bucket, api: null, trainer: null, episodeFunction: null, healthy: true });
    } finally {
      process.chdir(cwd);
    }
  });
});
