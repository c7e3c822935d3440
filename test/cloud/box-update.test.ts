/**
 * A code update reaches a training box without killing its run: when the stack's artifact pointer names a
 * new artifact, the box stops the run after the iteration in flight and puts it back in the queue; the box
 * restarted into the new artifact claims it again and the loop resumes it from its log, every iteration
 * once. Against s3rver and the local invoke endpoint, with the real TrainerBox and Episode handler.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalCloud, EPISODE_FUNCTION, type LocalCloud } from '../../trainer/dev/local-cloud/local-cloud.ts';
import { keys } from '../../shared/keys.ts';
import { ArtifactPointer, RunConfig, RunStatus } from '../../shared/schemas/index.ts';
import { CloudStack } from '../../trainer/assembly/cloud-stack.ts';
import { TrainerBox } from '../../trainer/cloud/box/trainer-box.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';
import { tinyRunConfig } from '../api/helpers.ts';
import { freePort } from './helpers/esopt-process.ts';
import { S3RVER_CREDENTIALS } from './helpers/local-stack-env.ts';

const TOKEN = 'box-update-test-token-0123456789';
const OLD = 'a'.repeat(64);
const NEW = 'b'.repeat(64);
/** An artifact whose install failed on the box (box-boot.sh update wrote it as ESOPT_ARTIFACT_SKIP). */
const REFUSED = 'c'.repeat(64);
const ITERATIONS = 4;
let cloud: LocalCloud;
let target: CloudStack;
let port: number;
const boxes: TrainerBox[] = [];
const savedEnv = { ...process.env };

beforeAll(async () => {
  Object.assign(process.env, S3RVER_CREDENTIALS);
  port = await freePort();
  cloud = await startLocalCloud({ prices: measuredPrices(), env: { ESOPT_TRAINER_URL: `http://127.0.0.1:${port}/v1`, ESOPT_TRAINER_TOKEN: TOKEN } });
  target = CloudStack.parse({ bucket: cloud.s3.bucket, episodeFunction: EPISODE_FUNCTION, s3Endpoint: cloud.s3.endpoint, lambdaEndpoint: cloud.invoke.url });
});
afterAll(async () => {
  for (const b of boxes) await b.close();
  await cloud?.close();
  for (const k of Object.keys(S3RVER_CREDENTIALS)) delete process.env[k];
  Object.assign(process.env, savedEnv);
});

function box(artifactSha256: string): TrainerBox {
  const b = new TrainerBox({ cloud: target, publicUrl: `http://127.0.0.1:${port}/v1`, host: '127.0.0.1', port, token: TOKEN, claimSettleMs: 20, pollMs: 100, updatePollMs: 100, trainingPollMs: 20, artifactSha256, skipArtifactSha256: REFUSED, log: pino({ level: 'silent' }) });
  boxes.push(b);
  return b;
}
const read = async (key: string) => {
  const body = await cloud.store.get(key);
  return body === null ? null : JSON.parse(new TextDecoder().decode(body));
};
const rowsDone = async (run: string) => (await cloud.store.list(`${keys.run(run)}metrics/`)).filter((k) => k.endsWith('.json')).length;
const pointTo = (sha256: string) => cloud.store.put(keys.artifactPointer(), JSON.stringify(ArtifactPointer.parse({ key: `artifacts/esopt-${sha256}.tgz`, sha256 })));

/** What the Api does for POST /runs: the config, status `requested`, and the queue entry. */
async function queueRun(run: string, overrides: Parameters<typeof tinyRunConfig>[0]): Promise<void> {
  const now = new Date().toISOString();
  await cloud.store.put(keys.config(run), JSON.stringify(RunConfig.parse(tinyRunConfig(overrides))));
  await cloud.store.put(keys.runStatus(run), JSON.stringify(RunStatus.parse({ run, state: 'requested', requestedAt: now, startedAt: null, finishedAt: null, error: null, updatedAt: now })));
  await cloud.store.put(keys.queuedWork('run', run), JSON.stringify({ kind: 'run', id: run, queuedAt: now }));
}

async function until(what: string, ok: () => Promise<boolean>, ms = 90_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('a new artifact deployed while a run trains', () => {
  it('hands the run over at an iteration boundary; the box on the new artifact resumes it, each iteration once', async () => {
    const run = 'handed-over';
    await pointTo(OLD);
    await queueRun(run, { iterations: ITERATIONS, evalInterval: 10, checkpointInterval: 1 });

    const old = box(OLD);
    old.start();
    await until('the first iteration', async () => (await rowsDone(run)) >= 1);
    // The same artifact named again changes nothing, nor one whose install failed on this box.
    await old.checkArtifact();
    await pointTo(REFUSED);
    await old.checkArtifact();
    expect((await read(keys.runStatus(run))).state).toBe('running');
    await pointTo(NEW);
    expect(await old.handedOver).toBe(NEW);

    const handed = RunStatus.parse(await read(keys.runStatus(run)));
    expect(handed).toMatchObject({ state: 'requested', finishedAt: null, stopReason: null, error: null });
    const doneBefore = await rowsDone(run);
    expect(doneBefore).toBeGreaterThanOrEqual(1);
    expect(doneBefore).toBeLessThan(ITERATIONS);
    // Back in the queue with its claim released, for the next box start.
    expect(await cloud.store.get(keys.queuedWork('run', run))).not.toBeNull();
    expect(await cloud.store.get(keys.workClaim('run', run))).toBeNull();
    await old.close();

    // The service restarted into the new artifact: it does not hand over again, and it resumes the run.
    const next = box(NEW);
    await next.checkArtifact();
    expect(await next.pollOnce()).toEqual([{ kind: 'run', id: run }]);
    expect(RunStatus.parse(await read(keys.runStatus(run))).state).toBe('finished');
    expect(await rowsDone(run)).toBe(ITERATIONS);
    const log = new TextDecoder()
      .decode((await cloud.store.get(keys.log(run)))!)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { iteration?: number });
    const updates = log.map((e) => e.iteration).filter((k): k is number => typeof k === 'number');
    expect(updates).toEqual(Array.from({ length: ITERATIONS }, (_, k) => k));
    expect(await cloud.store.get(keys.queuedWork('run', run))).toBeNull();
  }, 180_000);

  it('a box stopping (SIGTERM, a reboot) puts its run back in the queue after the iteration; the next start resumes it', async () => {
    const run = 'service-stopped';
    await pointTo(NEW);
    await queueRun(run, { iterations: 3, evalInterval: 10 });
    const first = box(NEW);
    first.start();
    await until('the first iteration', async () => (await rowsDone(run)) >= 1);
    await first.close();
    expect(RunStatus.parse(await read(keys.runStatus(run))).state).toBe('requested');
    expect(await rowsDone(run)).toBeLessThan(3);
    expect(await cloud.store.get(keys.queuedWork('run', run))).not.toBeNull();
    expect(await box(NEW).pollOnce()).toEqual([{ kind: 'run', id: run }]);
    expect(RunStatus.parse(await read(keys.runStatus(run))).state).toBe('finished');
    expect(await rowsDone(run)).toBe(3);
  }, 180_000);
});
