/**
 * Web episodes on Lambda's Chromium: the Episode function's Lambda entry (`handler`), told it runs on
 * Lambda ($AWS_LAMBDA_FUNCTION_NAME), resolves the Lambda build (@sparticuz/chromium) by itself and plays
 * one episode of every web task type in it, writing through the S3 adapter to s3rver. Also: the choice
 * rule of chromium-executable.ts, and the package against Lambda's deploy limits, from the installed files.
 */
import { existsSync, readFileSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { deflateRawSync } from 'node:zlib';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { handler } from '../../functions/episode.ts';
import type { ChromiumBackend } from '../../environments/web/chromium-backend.ts';
import { chooseChromium, chromiumExecutable } from '../../environments/web/chromium-executable.ts';
import { closeWebRuntime, webBackend } from '../../environments/web/runtime.ts';
import { TASK_TYPE_NAMES } from '../../environments/web/task-types/index.ts';
import { keys } from '../../shared/keys.ts';
import { RewardRecord } from '../../shared/schemas/index.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { EPISODE_INSTALLED_PACKAGES } from './helpers/episode-packages.ts';
import { webRequests } from './helpers/web-plan.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';


const LAMBDA_ENV = {
  AWS_LAMBDA_FUNCTION_NAME: 'esopt-test-Episode',
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'S3RVER',
  AWS_SECRET_ACCESS_KEY: 'S3RVER',
  ESOPT_S3_FORCE_PATH_STYLE: 'true',
  // What the stack sets (sst.config.ts): the handler refuses to start without it.
  ESOPT_COST_PRICES: JSON.stringify(measuredPrices()),
};
const saved = { ...process.env };
let s3: LocalS3;

beforeAll(async () => {
  s3 = await startLocalS3('esopt-lambda-chromium');
  // The browser this file checks is the one its own handler chooses, not one an earlier file in this worker left.
  await closeWebRuntime();
  delete process.env.ESOPT_CHROMIUM;
  Object.assign(process.env, LAMBDA_ENV, { ESOPT_BUCKET: s3.bucket, ESOPT_S3_ENDPOINT: s3.endpoint });
});
afterAll(async () => {
  await closeWebRuntime();
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
  Object.assign(process.env, saved);
  await s3?.close();
});

describe('the Episode function on Lambda with the Lambda Chromium', () => {
  it('chooses the browser by the rule: option, $ESOPT_CHROMIUM, Lambda build on Lambda, /usr/bin/chromium, Lambda build', () => {
    expect(chooseChromium(undefined, { AWS_LAMBDA_FUNCTION_NAME: 'f' })).toEqual({ kind: 'lambda', why: 'on Lambda' });
    expect(chooseChromium(undefined, { AWS_LAMBDA_FUNCTION_NAME: 'f', ESOPT_CHROMIUM: '/usr/bin/chromium' })).toEqual({ kind: 'path', path: '/usr/bin/chromium', why: 'ESOPT_CHROMIUM' });
    expect(chooseChromium('lambda', { ESOPT_CHROMIUM: '/usr/bin/chromium' })).toEqual({ kind: 'lambda', why: 'option' });
    expect(chooseChromium(undefined, { ESOPT_CHROMIUM: 'lambda' })).toEqual({ kind: 'lambda', why: 'ESOPT_CHROMIUM' });
    // Off Lambda with nothing named: the system browser (this machine has one).
    expect(chooseChromium(undefined, {})).toEqual({ kind: 'path', path: '/usr/bin/chromium', why: 'system' });
    expect(() => chooseChromium('/nonexistent/chromium', { AWS_LAMBDA_FUNCTION_NAME: 'f' })).toThrow(/Chromium not found at \/nonexistent\/chromium/);
  });

  it('plays one episode of every web task type through `handler` in the Lambda build, the oracle winning each', async () => {
    const requests = webRequests({ run: 'lambda-chromium' });
    expect(requests.map((r) => (r.task.value as { type: string }).type)).toEqual(TASK_TYPE_NAMES);
    const response = await handler({ episodes: requests });
    expect(response.ok).toBe(true);
    const store = new S3ObjectStore(s3.storeConfig);
    try {
      for (const request of requests) {
        const body = await store.get(keys.reward(request.run, 0, 'base', request.task.id));
        const record = RewardRecord.parse(JSON.parse(new TextDecoder().decode(body!)));
        expect({ task: request.task.id, reward: record.reward, error: record.error }).toEqual({ task: request.task.id, reward: 1, error: null });
        expect(record.steps).toBeGreaterThan(0);
      }
    } finally {
      store.destroy();
    }
    // The browser that played them is the Lambda build, inflated to the temp dir, not /usr/bin/chromium.
    const backend = webBackend({ backend: 'chromium' }) as ChromiumBackend;
    expect(backend.choice).toEqual({ kind: 'lambda', why: 'on Lambda' });
    const executable = await chromiumExecutable(backend.choice);
    expect(readlinkSync(`/proc/${await backend.browserPid()}/exe`)).toBe(executable);
    expect(executable).not.toBe('/usr/bin/chromium');
  }, 180_000);

  it("fits Lambda's deploy limits: bundle + installed packages within 250 MB unzipped (S3 upload), the inflated browser in /tmp's 512 MB", async () => {
    const roots = new Set<string>();
    // The packages and their dependencies, found as Node finds them (the nearest node_modules up the tree).
    const visit = (name: string, from: string) => {
      let root = '';
      for (let dir = from; !root; dir = dirname(dir)) {
        if (existsSync(join(dir, 'node_modules', name, 'package.json'))) root = join(dir, 'node_modules', name);
        else if (dir === dirname(dir)) throw new Error(`${name} is not installed (needed from ${from})`);
      }
      const manifest = join(root, 'package.json');
      if (roots.has(root)) return;
      roots.add(root);
      const deps = (JSON.parse(readFileSync(manifest, 'utf8')) as { dependencies?: Record<string, string> }).dependencies ?? {};
      for (const dep of Object.keys(deps)) visit(dep, root);
    };
    for (const name of EPISODE_INSTALLED_PACKAGES) visit(name, process.cwd());
    let unzipped = 0;
    let zipped = 0;
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) walk(path);
        else if (entry.isFile()) {
          unzipped += statSync(path).size;
          // Packed files are stored as they are (deflate gains nothing on them); the rest deflated at level 1,
          // never smaller than the zip a deploy makes, so the sum is an upper bound.
          zipped += /\.(br|gz|zip)$/.test(entry.name) ? statSync(path).size : deflateRawSync(readFileSync(path), { level: 1 }).length;
        }
      }
    };
    for (const root of roots) walk(root);
    const MB = 1024 * 1024;
    // The handler bundled as SST bundles it (esbuild, the installed packages external; unminified, so an upper bound).
    const bundle = await build({ entryPoints: ['functions/episode.ts'], bundle: true, platform: 'node', format: 'esm', target: 'node22', write: false, external: EPISODE_INSTALLED_PACKAGES, logLevel: 'silent' });
    const bundled = bundle.outputFiles.reduce((n, f) => n + f.contents.length, 0);
    // SST creates the function from its zip in S3 (s3Bucket/s3Key), so the limit that applies is Lambda's
    // 262,144,000 bytes unzipped for function + layers; the 50 MB zipped limit is a direct upload's only,
    // and the zip is over it (the brotli-packed browser alone is), so a direct upload would fail.
    expect(bundled + unzipped).toBeLessThanOrEqual(262_144_000);
    expect(zipped / MB).toBeGreaterThan(50);
    const inflated = statSync(await chromiumExecutable({ kind: 'lambda', why: 'option' })).size;
    expect(inflated / MB).toBeLessThan(512 - 100);
    console.info(`Episode function: bundle ${(bundled / MB).toFixed(1)} MB + packages ${(unzipped / MB).toFixed(1)} MB unzipped, packages ${(zipped / MB).toFixed(1)} MB zipped; inflated Chromium ${(inflated / MB).toFixed(1)} MB`);
  }, 60_000);
});
