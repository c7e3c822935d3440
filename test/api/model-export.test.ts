/**
 * GET /runs/{id}/model over both deployments' ports, with an exporter that writes a small directory per
 * request (the exporter itself is tested in test/export/): the local API makes the archive before it
 * answers and sends its bytes; the Api function's app queues the export for the box, answers 202 until
 * the box has made it, then redirects to a presigned S3 URL that downloads the archive without the token.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { extract } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiApp } from '../../functions/http-api/app.ts';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { CostPrices } from '../../shared/cost.ts';
import { keys, parseQueuedWorkKey } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { QueuedWork, RunConfig, type ModelExportRequest } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { InProcessModelExports } from '../../trainer/jobs/local-model-exports.ts';
import { runModelExport, type ExportInto } from '../../trainer/jobs/model-export-job.ts';
import { MemorySecretStore } from '../cloud/helpers/memory-secrets.ts';
import { tinyRunConfig } from './helpers.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const TOKEN = 'model-export-token-3f9a1c';
const RUN = 'tiny-export';
const scratch = mkdtempSync(join(tmpdir(), 'esopt-model-export-test-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A run with `updates` committed updates: its config and log, as the loop writes them. */
async function seedRun(store: ObjectStore, updates: number): Promise<void> {
  await store.put(keys.config(RUN), JSON.stringify(RunConfig.parse(tinyRunConfig())));
  const entries = Array.from({ length: updates }, (_, k) => JSON.stringify({ iteration: k, runSeed: 1, sigma: 0.02, alpha: 0.01, weightDecay: 0, members: [], normalizedRewards: [], thetaHashAfter: `h${k}` }));
  if (updates) await store.put(keys.log(RUN), `${entries.join('\n')}\n`);
}

/** Writes a directory naming what it was asked for; fails on demand. */
function recordingExporter(): { exportInto: ExportInto; calls: ModelExportRequest[]; failNext: { message: string | null } } {
  const calls: ModelExportRequest[] = [];
  const failNext = { message: null as string | null };
  const exportInto: ExportInto = async (request, out) => {
    calls.push(request);
    if (failNext.message) {
      const message = failNext.message;
      failNext.message = null;
      throw new Error(message);
    }
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, 'config.json'), JSON.stringify(request));
    writeFileSync(join(out, 'model.onnx'), Buffer.alloc(70_000, request.iteration + 1));
    return { thetaHash: `theta-${request.iteration}` };
  };
  return { exportInto, calls, failNext };
}

async function unpack(bytes: Uint8Array): Promise<Record<string, Buffer>> {
  const dir = mkdtempSync(join(scratch, 'unpacked-'));
  const file = join(dir, 'archive.tar');
  writeFileSync(file, bytes);
  mkdirSync(join(dir, 'x'));
  await extract({ file, cwd: join(dir, 'x') });
  return Object.fromEntries(['config.json', 'model.onnx'].map((f) => [f, readFileSync(join(dir, 'x', f))]));
}

const auth = { authorization: `Bearer ${TOKEN}` };
const silent = pino({ level: 'silent' });

describe('GET /runs/{id}/model on the local API', () => {
  const store = new FsObjectStore(join(scratch, 'local'));
  const exporter = recordingExporter();
  const app = createApiApp({
    store,
    token: TOKEN,
    runs: { start: async () => {}, stop: async () => {} },
    evaluations: { start: async () => {} },
    exports: new InProcessModelExports(store, exporter.exportInto),
    deployed: false,
    servesOwnModels: true,
    prices: measuredPrices(),
    log: silent,
    eventPollMs: 50,
  });
  beforeAll(() => seedRun(store, 3));

  it('answers the tarball of θ_k, made once: the latest committed update by default', async () => {
    const res = await app.request(`/runs/${RUN}/model`, { headers: auth });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-tar');
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="${RUN}-3-onnx.tar"`);
    const files = await unpack(new Uint8Array(await res.arrayBuffer()));
    expect(JSON.parse(files['config.json'].toString())).toEqual({ run: RUN, iteration: 3, format: 'onnx' });
    expect(files['model.onnx'].equals(Buffer.alloc(70_000, 4))).toBe(true);

    const again = await app.request(`/runs/${RUN}/model?iteration=3`, { headers: { ...auth, accept: 'application/json' } });
    expect(again.status).toBe(200);
    const view = (await again.json()) as any;
    expect(view).toMatchObject({ run: RUN, iteration: 3, format: 'onnx', state: 'ready', thetaHash: 'theta-3', url: `/runs/${RUN}/model?iteration=3&format=onnx` });
    expect(view.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(exporter.calls).toHaveLength(1);
  });

  it('refuses an iteration past the log with the field named, and an unknown run with 404', async () => {
    const res = await app.request(`/runs/${RUN}/model?iteration=4&format=safetensors`, { headers: auth });
    expect(res.status).toBe(400);
    const body = (await res.json()) as any;
    expect(body.error.issues).toEqual([{ path: 'iteration', message: expect.stringContaining('0…3') }]);
    expect((await app.request(`/runs/${RUN}/model?format=pt`, { headers: auth })).status).toBe(400);
    expect((await app.request('/runs/no-such-run/model', { headers: auth })).status).toBe(404);
    expect((await app.request(`/runs/${RUN}/model`)).status).toBe(401);
  });

  it('streams the archive checked against its SHA-256: a corrupted one is refused and made again on retry', async () => {
    const archive = join(scratch, 'local', ...keys.modelExportArchive(RUN, 3, 'onnx').split('/'));
    const bytes = readFileSync(archive);
    bytes[bytes.length - 1] ^= 0xff;
    writeFileSync(archive, bytes);
    const refused = await app.request(`/runs/${RUN}/model?iteration=3`, { headers: auth });
    expect(refused.status).toBe(422);
    expect(((await refused.json()) as any).error.message).toContain('does not match its SHA-256');
    const calls = exporter.calls.length;
    const remade = await app.request(`/runs/${RUN}/model?iteration=3&retry=true`, { headers: auth });
    expect(remade.status).toBe(200);
    expect(exporter.calls.length).toBe(calls + 1);
    expect((await unpack(new Uint8Array(await remade.arrayBuffer())))['model.onnx'].equals(Buffer.alloc(70_000, 4))).toBe(true);
  });

  it('says why an export failed, and makes it again only when asked to', async () => {
    exporter.failNext.message = 'tensor onnx::MatMul_9 has no parameter name';
    const failed = await app.request(`/runs/${RUN}/model?iteration=1&format=safetensors`, { headers: auth });
    expect(failed.status).toBe(422);
    expect(((await failed.json()) as any).error).toMatchObject({ code: 'export_failed', message: expect.stringContaining('onnx::MatMul_9') });
    const calls = exporter.calls.length;
    expect((await app.request(`/runs/${RUN}/model?iteration=1&format=safetensors`, { headers: auth })).status).toBe(422);
    expect(exporter.calls.length).toBe(calls);
    const retried = await app.request(`/runs/${RUN}/model?iteration=1&format=safetensors&retry=true`, { headers: auth });
    expect(retried.status).toBe(200);
    expect(JSON.parse((await unpack(new Uint8Array(await retried.arrayBuffer())))['config.json'].toString())).toEqual({ run: RUN, iteration: 1, format: 'safetensors' });
  });
});

describe('GET /runs/{id}/model on the Api function (S3, queued for the box)', () => {
  let s3: LocalS3;
  let store: S3ObjectStore;
  let app: ReturnType<typeof createCloudApp>;
  beforeAll(async () => {
    s3 = await startLocalS3('esopt-model-export');
    store = new S3ObjectStore({ ...s3.storeConfig });
    app = createCloudApp({ ESOPT_BUCKET: s3.bucket, AWS_REGION: 'us-east-1', ESOPT_TOKEN: TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()) }, store, silent, new MemorySecretStore());
    await seedRun(store, 2);
  }, 60_000);
  afterAll(async () => {
    store?.destroy();
    await s3?.close();
  });

  it('queues the export once, answers 202 until the box made it, then redirects to a presigned URL', async () => {
    const first = await app.request(`/runs/${RUN}/model?iteration=2`, { headers: auth });
    expect(first.status).toBe(202);
    expect(first.headers.get('retry-after')).toBe('5');
    expect(await first.json()).toMatchObject({ run: RUN, iteration: 2, format: 'onnx', state: 'queued' });
    expect((await app.request(`/runs/${RUN}/model?iteration=2`, { headers: auth })).status).toBe(202);
    const queued = (await store.list(keys.workQueue())).filter((k) => parseQueuedWorkKey(k)?.kind === 'export');
    expect(queued).toHaveLength(1);
    const work = QueuedWork.parse(JSON.parse(new TextDecoder().decode((await store.get(queued[0]))!)));
    expect(work.export).toEqual({ run: RUN, iteration: 2, format: 'onnx' });

    // what the box's export lane does with the entry
    const ready = await runModelExport(store, work.export!, recordingExporter().exportInto);
    expect(ready.state).toBe('ready');

    const res = await app.request(`/runs/${RUN}/model?iteration=2`, { headers: auth });
    expect(res.status).toBe(302);
    const url = res.headers.get('location')!;
    expect(url).toContain('X-Amz-Signature=');
    expect(url).not.toContain(TOKEN);
    const download = await fetch(url);
    expect(download.status).toBe(200);
    const files = await unpack(new Uint8Array(await download.arrayBuffer()));
    expect(JSON.parse(files['config.json'].toString())).toEqual({ run: RUN, iteration: 2, format: 'onnx' });

    const view = (await (await app.request(`/runs/${RUN}/model?iteration=2`, { headers: { ...auth, accept: 'application/json' } })).json()) as any;
    expect(view).toMatchObject({ state: 'ready', bytes: ready.bytes, sha256: ready.sha256 });
    expect(view.url).toContain('X-Amz-Signature=');
    expect(Date.parse(view.expiresAt)).toBeGreaterThan(Date.now());
  }, 60_000);

  it('retry=true asks again for an export whose maker went silent past the stale limit, not for one that beats', async () => {
    const exportingFor = async (iteration: number, ageMs: number) => {
      const at = new Date(Date.now() - ageMs).toISOString();
      await store.put(keys.modelExportStatus(RUN, iteration, 'onnx'), JSON.stringify({ run: RUN, iteration, format: 'onnx', state: 'exporting', requestedAt: at, updatedAt: at }));
    };
    const exportEntries = async () => (await store.list(keys.workQueue())).filter((k) => parseQueuedWorkKey(k)?.kind === 'export');
    const before = (await exportEntries()).length;
    await exportingFor(1, 2 * 60_000);
    expect((await app.request(`/runs/${RUN}/model?iteration=1&retry=true`, { headers: auth })).status).toBe(202);
    expect(await exportEntries()).toHaveLength(before);
    await exportingFor(1, 11 * 60_000);
    const again = await app.request(`/runs/${RUN}/model?iteration=1&retry=true`, { headers: { ...auth, accept: 'application/json' } });
    expect(again.status).toBe(202);
    expect(await again.json()).toMatchObject({ state: 'queued' });
    expect(await exportEntries()).toHaveLength(before + 1);
  }, 60_000);

  it("rewrites an export's status while it is made, and its end is never overwritten by that", async () => {
    const seen: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow: ExportInto = async (request, out) => {
      await gate;
      return recordingExporter().exportInto(request, out);
    };
    const made = runModelExport(store, { run: RUN, iteration: 0, format: 'onnx' }, slow, 20);
    const key = keys.modelExportStatus(RUN, 0, 'onnx');
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, 60));
      seen.push(JSON.parse(new TextDecoder().decode((await store.get(key))!)).updatedAt);
    }
    release();
    const ready = await made;
    await new Promise((r) => setTimeout(r, 80));
    expect(new Set(seen).size).toBeGreaterThan(1);
    expect(JSON.parse(new TextDecoder().decode((await store.get(key))!))).toMatchObject({ state: 'ready', sha256: ready.sha256 });
  }, 60_000);
});
