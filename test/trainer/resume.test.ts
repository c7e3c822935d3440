/**
 * Exact resume after a real kill -9. A deterministic run (sudoku with the seeded random scripted policy,
 * so rewards vary by member but never depend on anything but seeds) is trained once uninterrupted; then
 * the same config is started in a child process that stops itself at a named point (ESOPT_STOP_AT), is
 * SIGKILLed there with its whole process group, and is finished with `esopt train --resume`. The final θ
 * and every iteration's update record must be bit-identical to the uninterrupted run. Five points with
 * the fs store; with the S3 store (`train --cloud` against s3rver and the local invoke endpoint), the two
 * points where a resume must collect again from the bucket.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EPISODE_FUNCTION, startLocalCloud, type LocalCloud } from '../../functions/local-cloud/local-cloud.ts';
import { keys } from '../../shared/keys.ts';
import { FAULT_POINTS } from '../../trainer/loop/fault-points.ts';

const BIN = join(import.meta.dirname, '../../trainer/cli/bin.js');
const root = mkdtempSync(join(tmpdir(), 'esopt-resume-'));
const store = join(root, 'store');
const configPath = join(root, 'config.json');
const ITERATIONS = 3;

const baseConfig = {
  environment: { name: 'sudoku', options: { size: 4, blanks: 4, shapedReward: true, invalidMove: 'waste' } },
  tasks: { seed: 3, trainPerIteration: 2, evalCount: 2 },
  model: { preset: 'tiny', seed: 1 },
  es: { population: 6, sigma: 0.05, alpha: 0.05, weightDecay: 0.01 },
  iterations: ITERATIONS,
  evalInterval: 2,
  checkpointInterval: 2,
  policy: 'scripted:random',
  workers: 1,
  deadlineMs: 60_000,
  seed: 11,
};
writeFileSync(configPath, JSON.stringify(baseConfig));

afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in its own process group; with `stopAt`, SIGKILLs the group once the trainer has stopped itself there. */
function esopt(args: string[], stopAt?: string, env: Record<string, string> = {}): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env, ...(stopAt ? { ESOPT_STOP_AT: stopAt } : {}) },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    let poll: NodeJS.Timeout | undefined;
    if (stopAt) {
      poll = setInterval(() => {
        // The trainer is the node process tsx runs in: stopped ('T') once it reached the point.
        const state = (() => {
          try {
            return readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]?.[0];
          } catch {
            return undefined;
          }
        })();
        if (state === 'T') {
          clearInterval(poll);
          process.kill(-child.pid!, 'SIGKILL');
        }
      }, 20);
    }
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearInterval(poll);
      // Workers of a killed trainer are in its group; make sure none outlives it.
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* the group is gone */
      }
      resolve({ code, signal, stdout, stderr });
    });
  });
}

interface Report {
  thetaHash: string;
  run: string;
  perIteration: unknown[];
  files: { report: string; curve: string };
}

function report(out: Exit): Report {
  expect(out.code, out.stderr).toBe(0);
  const r = JSON.parse(out.stdout.trim().split('\n').at(-1)!) as Report;
  // The report and the curve are written, and every iteration has its metrics row.
  expect(existsSync(r.files.report) && existsSync(r.files.curve)).toBe(true);
  expect(readFileSync(r.files.curve, 'utf8')).toMatch(/^<svg /);
  expect(r.perIteration).toHaveLength(ITERATIONS);
  return r;
}

function updates(run: string): unknown[] {
  return Array.from({ length: ITERATIONS }, (_, k) => JSON.parse(readFileSync(join(store, 'runs', run, 'iterations', String(k).padStart(8, '0'), 'update.json'), 'utf8')));
}

describe('train --resume after kill -9', () => {
  let reference: Report;

  it('an uninterrupted run moves θ', async () => {
    reference = report(await esopt(['train', '--config', configPath, '--run', 'reference', '--store', store, '--json']));
    const first = JSON.parse(readFileSync(join(store, 'runs/reference/iterations/00000000/manifest.json'), 'utf8'));
    expect(reference.thetaHash).not.toBe(first.thetaHash);
    const u = updates('reference') as Array<{ normalizedRewards: Array<{ value: number }> }>;
    // Rewards differ between members, so the updates are not all zero.
    expect(u.some((x) => x.normalizedRewards.some((n) => n.value !== 0))).toBe(true);
  });

  const points: Array<{ at: string; tear?: boolean }> = [
    { at: 'after-fanout@1' },
    // Collected and θ updated in memory, nothing of the update recorded: resume re-collects the same records.
    { at: 'after-update@1' },
    // The update record is written but not the log entry: resume must replay the record, not re-collect.
    { at: 'after-update-record@1' },
    // Weights of checkpoint 2 written, its meta not: an unfinished checkpoint is ignored.
    { at: 'mid-checkpoint@1' },
    // Checkpoint 2 complete, then its weights torn: resume must fall back to θ_0 + the whole log.
    { at: 'after-checkpoint@1', tear: true },
  ];
  for (const { at, tear } of points) {
    it(`killed at ${at}${tear ? ' with a torn checkpoint' : ''}: resume is bit-identical`, async () => {
      const run = `killed-${at.replace(/[@]/g, '-')}${tear ? '-torn' : ''}`;
      const killed = await esopt(['train', '--config', configPath, '--run', run, '--store', store, '--json'], at);
      expect(killed.signal).toBe('SIGKILL');
      expect(killed.stderr).toContain(`stopping at ${at}`);
      if (tear) {
        const weights = join(store, 'runs', run, 'checkpoints/00000002/weights.bin');
        expect(existsSync(weights)).toBe(true);
        truncateSync(weights, 1000);
      }
      const resumed = report(await esopt(['train', '--resume', run, '--store', store, '--json']));
      expect(resumed.thetaHash).toBe(reference.thetaHash);
      // Exactly the same records counted with the same normalised rewards: nothing lost, nothing twice.
      expect(updates(run)).toEqual(updates('reference').map((u) => ({ ...(u as object), run })));
    });
  }

  it('low-rank mode: θ replayed from θ_0 through the log alone is bit-identical', async () => {
    const lowRankPath = join(root, 'lowrank.json');
    writeFileSync(lowRankPath, JSON.stringify({ ...baseConfig, mode: 'lowrank', rank: 2 }));
    const first = report(await esopt(['train', '--config', lowRankPath, '--run', 'lowrank', '--store', store, '--json']));
    const theta0 = JSON.parse(readFileSync(join(store, 'runs/lowrank/iterations/00000000/manifest.json'), 'utf8')).thetaHash;
    expect(first.thetaHash).not.toBe(theta0);
    rmSync(join(store, 'runs/lowrank/checkpoints'), { recursive: true });
    const replayed = report(await esopt(['train', '--resume', 'lowrank', '--store', store, '--json']));
    expect(replayed.thetaHash).toBe(first.thetaHash);
  });
});

describe('train --cloud --resume after kill -9 (S3 adapter on s3rver, Lambda adapter on the local invoke endpoint)', () => {
  let cloud: LocalCloud;
  let env: Record<string, string>;
  const cloudArgs = ['--cloud', '--public-url', 'http://127.0.0.1:9/v1', '--json'];
  beforeAll(async () => {
    cloud = await startLocalCloud();
    env = {
      ESOPT_BUCKET: cloud.s3.bucket,
      ESOPT_EPISODE_FUNCTION: EPISODE_FUNCTION,
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL_S3: cloud.s3.endpoint,
      AWS_ENDPOINT_URL_LAMBDA: cloud.invoke.url,
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
      ESOPT_TOKEN: 'resume-cloud-token',
    };
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
