/**
 * Exact resume after a real kill -9, fs store. A deterministic run (helpers/killable-run.ts) is trained
 * once uninterrupted; then the same config is started in a child process that stops itself at a named
 * point (ESOPT_STOP_AT), is SIGKILLed there with its whole process group, and is finished with
 * `esopt train --resume`. The final θ and every iteration's update record must be bit-identical to the
 * uninterrupted run, at five points; low-rank mode replays θ from θ_0 through the log alone. The same
 * with the S3 store is resume-cloud.test.ts (a file of its own, so the two run side by side).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { baseConfig, esopt, ITERATIONS, type Exit, type Report } from './helpers/killable-run.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-resume-'));
const store = join(root, 'store');
const configPath = join(root, 'config.json');
writeFileSync(configPath, JSON.stringify(baseConfig));

afterAll(() => rmSync(root, { recursive: true, force: true }));

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
