/**
 * Exact resume after a real kill -9 with the S3 store: `train --cloud` against s3rver and the local invoke
 * endpoint, killed at each of the five fault points (as resume.test.ts does with the fs store) and
 * finished with `train --cloud --resume`; θ and every update record in the bucket must be bit-identical
 * to an uninterrupted cloud run. Before the update record is written, the resume must collect again from
 * the bucket.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalCloud, type LocalCloud } from '../../trainer/dev/local-cloud/local-cloud.ts';
import { keys } from '../../shared/keys.ts';
import { FAULT_POINTS } from '../../trainer/training/loop/fault-points.ts';
import { baseConfig, esopt, ITERATIONS, type Exit, type Report } from './helpers/killable-run.ts';
import { localStackEnv } from '../cloud/helpers/local-stack-env.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-resume-cloud-'));
const configPath = join(root, 'config.json');
writeFileSync(configPath, JSON.stringify(baseConfig));

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('train --cloud --resume after kill -9 (S3 adapter on s3rver, Lambda adapter on the local invoke endpoint)', () => {
  let cloud: LocalCloud;
  let env: Record<string, string>;
  const cloudArgs = ['--cloud', '--public-url', 'http://127.0.0.1:9/v1', '--json'];
  beforeAll(async () => {
    cloud = await startLocalCloud({ prices: measuredPrices() });
    env = { ...localStackEnv(cloud), ESOPT_TOKEN: 'resume-cloud-token' };
  });
  afterAll(async () => {
    await cloud?.close();
  });
  /** A cloud run's report and curve are in the bucket (s3:// paths): only the summary line is checked here. */
  const cloudReport = (out: Exit): Report => {
    expect(out.code, out.stderr).toBe(0);
    const r = JSON.parse(out.stdout.trim().split('\n').at(-1)!) as Report;
    expect(r.files.report).toMatch(/^s3:\/\//);
    expect(r.perIteration).toHaveLength(ITERATIONS);
    return r;
  };
  const s3Updates = async (run: string) =>
    Promise.all(Array.from({ length: ITERATIONS }, async (_, k) => JSON.parse(new TextDecoder().decode((await cloud.store.get(keys.update(run, k)))!)) as object));

  it('killed at each of the five points: resume from the bucket is bit-identical to an uninterrupted cloud run', async () => {
    const reference = cloudReport(await esopt(['train', '--config', configPath, '--run', 'cloud-reference', ...cloudArgs], undefined, env));
    const referenceUpdates = await s3Updates('cloud-reference');
    for (const at of FAULT_POINTS.map((p) => `${p}@1`)) {
      const run = `cloud-killed-${at.replace('@', '-')}`;
      const killed = await esopt(['train', '--config', configPath, '--run', run, ...cloudArgs], at, env);
      expect(killed.signal).toBe('SIGKILL');
      expect(killed.stderr).toContain(`stopping at ${at}`);
      // Before the update record is written, the resume must collect iteration 1 again from the bucket.
      if (at === 'after-fanout@1' || at === 'after-update@1') expect(await cloud.store.get(keys.update(run, 1))).toBeNull();
      else expect(await cloud.store.get(keys.update(run, 1))).not.toBeNull();
      const resumed = cloudReport(await esopt(['train', '--resume', run, ...cloudArgs], undefined, env));
      expect(resumed.thetaHash).toBe(reference.thetaHash);
      expect(await s3Updates(run)).toEqual(referenceUpdates.map((u) => ({ ...u, run })));
    }
  }, 240_000);
});
