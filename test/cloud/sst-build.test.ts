/**
 * The Api and Episode functions built as `sst deploy` builds them (trainer/dev/rehearsal/sst-build.ts, from
 * sst.config.ts's own definitions), run by plain `node` from the built directory, outside the repository:
 * the package holds the bundle, the `nodejs.install` packages and the `copyFiles`, nothing else; the Api's
 * bundle serves the dashboard, /docs and every asset they reference, and queues a web run against s3rver;
 * a package missing one copied file fails the same check. (The rehearsal runs them under aws-lambda-ric.)
 */
import { createHash } from 'node:crypto';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { functionUrlEvent } from './helpers/function-url-event.ts';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { startEc2Endpoint, type Ec2Endpoint } from '../../trainer/dev/local-cloud/ec2-endpoint.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { pushModel } from '../../trainer/training/model-store/push-model.ts';
import { seedIsolatedVmPrebuild } from '../../trainer/dev/rehearsal/prebuilt-binaries.ts';
import { buildFunction, type FunctionBuild } from '../../trainer/dev/rehearsal/sst-build.ts';
import { stackFunctions, type StackFunction } from '../../trainer/dev/rehearsal/sst-stack.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const TOKEN = 'sst-build-test-token-0123456789';

type Answer = { statusCode: number; body: string; headers?: Record<string, string> };

/**
 * The bundle imported by `node` with the built directory as its working directory and the function's
 * environment (its NODE_OPTIONS included); events go in on stdin, answers come back on fd 3 (the bundle logs to stdout).
 */
const DRIVER = `
import { writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
const reply = (value) => writeSync(3, JSON.stringify(value) + '\\n');
try {
  const { handler } = await import('./bundle.mjs');
  const require = createRequire(new URL('./bundle.mjs', import.meta.url));
  let hono = null;
  try { hono = require.resolve('hono'); } catch {}
  reply({ ready: typeof handler, paths: require.resolve.paths('hono'), hono, execArgv: process.execArgv });
  for await (const line of createInterface({ input: process.stdin })) {
    try { reply({ answer: await handler(JSON.parse(line), {}) }); } catch (err) { reply({ error: String(err?.stack ?? err) }); }
  }
} catch (err) {
  reply({ error: String(err?.stack ?? err) });
}
`;

interface Running {
  ready: { ready: string; paths: string[]; hono: string | null };
  call(event: object): Promise<Answer>;
  stop(): void;
}

async function runBundle(dir: string, env: Record<string, string>): Promise<Running> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', DRIVER], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', HOME: dir, ...env },
    stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
  }) as unknown as ChildProcessWithoutNullStreams;
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdout.resume();
  const lines = createInterface({ input: (child.stdio as unknown as Readable[])[3]! })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`the bundle's process ended: ${stderr.slice(-2000)}`);
    const message = JSON.parse(value as string) as { error?: string } & Record<string, unknown>;
    if (message.error) throw new Error(message.error);
    return message;
  };
  const ready = (await next()) as unknown as Running['ready'];
  return {
    ready,
    async call(event) {
      child.stdin.write(`${JSON.stringify(event)}\n`);
      return (await next()).answer as Answer;
    },
    stop: () => child.kill(),
  };
}

/** Every page of the dashboard and /docs and every asset they reference, as `path status` lines, each expected 200. */
async function servePages(api: Running): Promise<string[]> {
  const seen: string[] = [];
  const get = async (path: string) => {
    const answer = await api.call(functionUrlEvent('GET', path));
    seen.push(`${path} ${answer.statusCode}`);
    return answer;
  };
  for (const page of ['/', '/docs']) {
    const html = (await get(page)).body;
    const referenced = [...html.matchAll(/(?:href|src)="(\/[^"#]*)"/g)].map((m) => m[1]!);
    for (const path of referenced.filter((p) => p.includes('/assets/'))) {
      const answer = await get(path);
      if (answer.statusCode === 200) expect(answer.body.length, path).toBeGreaterThan(100);
    }
  }
  return seen;
}

let s3: LocalS3;
/** The trainer box, stopped: the Api starts it when it queues work. */
let ec2: Ec2Endpoint;
const TRAINER_INSTANCE = 'i-0123456789abcdef0';
let fns: StackFunction[];
let api: FunctionBuild;
let episode: FunctionBuild;
const running: Running[] = [];
const scratch: string[] = [];

const fn = (name: string) => fns.find((f) => f.name === name)!;
/** The Api function's environment on this machine: the stack's, the bucket on s3rver. */
const apiEnv = () => ({
  ...fn('Api').environment,
  ESOPT_BUCKET: s3.bucket,
  ESOPT_TOKEN: TOKEN,
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'S3RVER',
  AWS_SECRET_ACCESS_KEY: 'S3RVER',
  AWS_ENDPOINT_URL_S3: s3.endpoint,
  ESOPT_TRAINER_INSTANCE: TRAINER_INSTANCE,
  AWS_ENDPOINT_URL_EC2: ec2.url,
});

beforeAll(async () => {
  s3 = await startLocalS3('esopt-sst-build');
  ec2 = await startEc2Endpoint({ [TRAINER_INSTANCE]: 'stopped' });
  fns = await stackFunctions();
  // As the rehearsal does: isolated-vm's binary where prebuild-install looks before GitHub (out of reach here).
  seedIsolatedVmPrebuild(ROOT);
  // One at a time: each may run an npm install on a 2-core machine.
  api = await buildFunction(fn('Api'), { root: ROOT });
  episode = await buildFunction(fn('Episode'), { root: ROOT });
  console.info(`built Api ${(api.bytes / 1e6).toFixed(1)} MB in ${api.ms} ms${api.cached ? ' (cached)' : ''}, Episode ${(episode.bytes / 1e6).toFixed(1)} MB in ${episode.ms} ms${episode.cached ? ' (cached)' : ''}`);
}, 900_000);

afterAll(async () => {
  for (const r of running) r.stop();
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  await s3?.close();
  await ec2?.close();
});

describe('the functions built as sst deploy builds them', () => {
  it('hold the bundle, the nodejs.install packages with their dependencies, and the copyFiles, outside the repository', () => {
    for (const build of [api, episode]) {
      const def = fn(build.name);
      expect(relative(ROOT, build.dir).startsWith('..'), build.dir).toBe(true);
      expect(build.handler).toBe('bundle.handler');
      const top = readdirSync(build.dir).sort();
      // The source map is uploaded apart from the zip.
      // SST writes a package.json and installs only when nodejs.install names packages.
      const manifests = def.install.length ? ['node_modules', 'package-lock.json', 'package.json'] : [];
      expect(top).toEqual([...new Set(['bundle.mjs', ...manifests, ...def.copyFiles.map((c) => c.to.split('/')[0]!)])].sort());
      if (def.install.length) expect(JSON.parse(readFileSync(join(build.dir, 'package.json'), 'utf8'))).toEqual({ dependencies: Object.fromEntries(def.install.map((p) => [p, expect.stringMatching(/^\d+\.\d+\.\d+$/)])) });
      // node_modules: what npm installed from the cut lockfile (the install packages and their dependencies), and the copied files' folders.
      const locked = def.install.length
        ? Object.keys((JSON.parse(readFileSync(join(build.dir, 'package-lock.json'), 'utf8')) as { packages: Record<string, unknown> }).packages)
            .filter((p) => p.startsWith('node_modules/') && !p.slice('node_modules/'.length).includes('/node_modules/'))
            .map((p) => p.slice('node_modules/'.length))
        : [];
      for (const p of def.install) expect(locked).toContain(p);
      const copiedPackages = def.copyFiles.filter((c) => c.to.startsWith('node_modules/')).map((c) => c.to.split('/')[1]!);
      const installedNames = readdirSync(join(build.dir, 'node_modules')).flatMap((n) => (n.startsWith('@') ? readdirSync(join(build.dir, 'node_modules', n)).map((m) => `${n}/${m}`) : n.startsWith('.') ? [] : [n]));
      expect(installedNames.sort()).toEqual([...new Set([...locked, ...copiedPackages])].sort());
      // The repository's own dependencies are bundled, not shipped.
      for (const bundled of ['hono', 'zod', '@aws-sdk/client-s3']) expect(existsSync(join(build.dir, 'node_modules', bundled)), bundled).toBe(false);
      for (const { to } of def.copyFiles) expect(existsSync(join(build.dir, to)), to).toBe(true);
    }
    expect(episode.installed.sort()).toEqual(['@sparticuz/chromium', 'isolated-vm', 'playwright-core']);
    expect(api.installed).toEqual([]);
  });

  it('loads the Episode bundle under plain node from its directory, with its NODE_OPTIONS (isolated-vm, playwright-core installed beside it)', async () => {
    const env: Record<string, string> = { ...fn('Episode').environment, AWS_REGION: 'us-east-1' };
    expect(env.NODE_OPTIONS).toBe('--no-node-snapshot');
    const r = await runBundle(episode.dir, env);
    running.push(r);
    expect(r.ready.ready).toBe('function');
    expect(r.ready.hono).toBeNull();
    for (const path of r.ready.paths) expect(path.startsWith(ROOT), path).toBe(false);
  }, 60_000);

  it('serves the dashboard, /docs and every asset they reference from the Api bundle, and queues a web run', async () => {
    const r = await runBundle(api.dir, apiEnv());
    running.push(r);
    // Nothing resolves from the repository: hono is bundled, and no node_modules above the package is the repository's.
    expect(r.ready.hono).toBeNull();
    for (const path of r.ready.paths) expect(path.startsWith(ROOT), path).toBe(false);
    const pages = await servePages(r);
    expect(pages).toEqual(expect.arrayContaining(['/ 200', '/docs 200', '/assets/dashboard.js 200', '/assets/uplot.js 200', '/docs/assets/swagger-ui-bundle.js 200']));
    expect(pages.filter((p) => !p.endsWith(' 200'))).toEqual([]);
    // A web run (with the cost limit a deployed stack requires): validating its config loads the web environment's definition, not its browser runtime;
    // its model, pushed to the bucket beforehand, is pinned by the bundled Api reading the model catalog.
    const { manifestSha256 } = await pushModel(new S3ObjectStore(s3.storeConfig), join(ROOT, 'models/sudoku-6x6-grid'), { name: 'demo-base' });
    const config = JSON.parse(readFileSync(join(ROOT, 'configs/demo.json'), 'utf8')) as Record<string, unknown>;
    const web = { ...config, name: 'web-bundle', environment: { name: 'web', options: { backend: 'chromium' } }, model: { name: 'demo-base' }, budget: { maxCostUsd: 1 } };
    const created = await r.call(functionUrlEvent('POST', '/runs', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, JSON.stringify(web)));
    expect({ status: created.statusCode, body: created.statusCode === 201 ? '' : created.body }).toEqual({ status: 201, body: '' });
    const { id } = JSON.parse(created.body) as { id: string };
    const detail = await r.call(functionUrlEvent('GET', `/runs/${id}`, { authorization: `Bearer ${TOKEN}` }));
    expect(JSON.parse(detail.body)).toMatchObject({ state: 'requested', config: { model: { name: 'demo-base', manifest: manifestSha256 } } });
    // Queuing it started the stopped trainer box, with the EC2 client bundled (loaded on first use).
    expect(ec2.requests[0]).toEqual({ action: 'StartInstances', instanceIds: [TRAINER_INSTANCE] });
    expect(ec2.state(TRAINER_INSTANCE)).toMatch(/^(pending|running)$/);
    // Its model: the bundled route queues the export, then (once the box has made it) presigns the archive's URL
    // with the bundled presigner, which the SDK loads on first use.
    const auth = { authorization: `Bearer ${TOKEN}` };
    const queued = await r.call(functionUrlEvent('GET', `/runs/${id}/model`, auth));
    expect(queued.statusCode, queued.body).toBe(202);
    const store = new S3ObjectStore(s3.storeConfig);
    const archive = new TextEncoder().encode('an archive the box made');
    await store.put(keys.modelExportArchive(id, 0, 'onnx'), archive);
    const now = new Date().toISOString();
    const sha256 = createHash('sha256').update(archive).digest('hex');
    await store.put(keys.modelExportStatus(id, 0, 'onnx'), JSON.stringify({ run: id, iteration: 0, format: 'onnx', state: 'ready', requestedAt: now, updatedAt: now, bytes: archive.byteLength, sha256, thetaHash: 'h' }));
    const ready = await r.call(functionUrlEvent('GET', `/runs/${id}/model`, auth));
    expect(ready.statusCode, ready.body).toBe(302);
    const location = String(ready.headers?.location ?? ready.headers?.Location);
    expect(location).toContain('X-Amz-Signature=');
    const download = await fetch(location);
    expect(download.status).toBe(200);
    expect(new Uint8Array(await download.arrayBuffer())).toEqual(archive);
  }, 60_000);

  it('fails the same check when the package lacks one copied file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'esopt-sst-build-missing-'));
    scratch.push(dir);
    cpSync(api.dir, dir, { recursive: true, verbatimSymlinks: true });
    rmSync(join(dir, 'node_modules/swagger-ui-dist/swagger-ui.css'));
    const r = await runBundle(dir, apiEnv());
    running.push(r);
    expect((await servePages(r)).filter((p) => !p.endsWith(' 200'))).toEqual(['/docs/assets/swagger-ui.css 500']);
  }, 60_000);
});
