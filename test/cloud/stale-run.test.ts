/**
 * A run left `running` by a trainer box process that died (its queue entry still there, claimed by that
 * process) is marked failed by the next box, with how to resume it; a claimant that may still be alive is
 * left alone. Against s3rver through the box's own store, the real TrainerBox.
 */
import { hostname } from 'node:os';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalCloud, EPISODE_FUNCTION, type LocalCloud } from '../../trainer/dev/local-cloud/local-cloud.ts';
import { keys } from '../../shared/keys.ts';
import { RunConfig, RunStatus } from '../../shared/schemas/index.ts';
import { CloudStack } from '../../trainer/assembly/cloud-stack.ts';
import { TrainerBox } from '../../trainer/cloud/box/trainer-box.ts';
import { tinyRunConfig } from '../api/helpers.ts';
import { S3RVER_CREDENTIALS } from './helpers/local-stack-env.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

let cloud: LocalCloud;
let box: TrainerBox;
const savedEnv = { ...process.env };
const HOUR = 3_600_000;

beforeAll(async () => {
  Object.assign(process.env, S3RVER_CREDENTIALS);
  cloud = await startLocalCloud({ prices: measuredPrices(), env: {} });
  const target = CloudStack.parse({ bucket: cloud.s3.bucket, episodeFunction: EPISODE_FUNCTION, s3Endpoint: cloud.s3.endpoint, lambdaEndpoint: cloud.invoke.url });
  box = new TrainerBox({ cloud: target, publicUrl: 'http://127.0.0.1:1/v1', host: '127.0.0.1', port: 0, token: 'stale-run-test-token', claimSettleMs: 20, staleAfterMs: HOUR, log: pino({ level: 'silent' }) });
});
afterAll(async () => {
  await box?.close();
  await cloud?.close();
  for (const k of Object.keys(S3RVER_CREDENTIALS)) delete process.env[k];
  Object.assign(process.env, savedEnv);
});

/** A run some box claimed at `claimedAt`, status `running` since then, its queue entry still there. */
async function leftRunning(run: string, claimedBy: string, claimedAt: Date) {
  const at = claimedAt.toISOString();
  await cloud.store.put(keys.config(run), JSON.stringify(RunConfig.parse(tinyRunConfig({ iterations: 3 }))));
  await cloud.store.put(keys.runStatus(run), JSON.stringify(RunStatus.parse({ run, state: 'running', requestedAt: at, startedAt: at, finishedAt: null, error: null, updatedAt: at })));
  await cloud.store.put(keys.queuedWork('run', run), JSON.stringify({ kind: 'run', id: run, queuedAt: at }));
  await cloud.store.put(keys.workClaim('run', run), JSON.stringify({ kind: 'run', id: run, claimId: 'a'.repeat(32), claimedBy, claimedAt: at }));
}
const status = async (run: string) => RunStatus.parse(JSON.parse(new TextDecoder().decode((await cloud.store.get(keys.runStatus(run)))!)));

describe('a run whose trainer is gone', () => {
  it('is marked failed, saying how to resume, when its claimant on this host no longer exists or another host went silent', async () => {
    // a pid no process has (Linux pids stop at 2^22)
    await leftRunning('dead-here', `${hostname()}:${2 ** 22 + 7}`, new Date());
    await leftRunning('silent-there', 'ip-10-0-0-9:4242', new Date(Date.now() - 2 * HOUR));
    expect(await box.pollOnce()).toEqual([]);
    for (const run of ['dead-here', 'silent-there']) {
      const s = await status(run);
      expect(s.state, run).toBe('failed');
      expect(s.error).toMatch(new RegExp(`^interrupted: the trainer box process that ran it \\(.*\\) is gone; its checkpoints and log are intact: resume it with \`esopt train --cloud --resume ${run}\`$`));
      expect(s.finishedAt).not.toBeNull();
      expect(await cloud.store.get(keys.queuedWork('run', run))).toBeNull();
    }
  });

  it('is left running while its claimant may be alive: a live process here, or recent signs of life elsewhere', async () => {
    await leftRunning('alive-here', `${hostname()}:${process.ppid}`, new Date(Date.now() - 10 * HOUR));
    await leftRunning('recent-there', 'ip-10-0-0-9:4242', new Date(Date.now() - 10 * 60_000));
    await box.pollOnce();
    for (const run of ['alive-here', 'recent-there']) expect((await status(run)).state, run).toBe('running');
  });
});
