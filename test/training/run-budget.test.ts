/**
 * A run's budget (RunConfig.budget): it stops cleanly before an iteration would pass a limit — θ so far
 * checkpointed, the report and status saying which limit — and resumes with a larger one to the same θ an
 * unbudgeted run reaches. Spend so far is in every metrics row.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { RunConfig } from '../../shared/schemas/index.ts';
import { budgetStop, NOTHING_SPENT, spentAfter } from '../../trainer/training/loop/budget.ts';
import { baseConfig, esopt } from './helpers/killable-run.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-budget-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const report = (out: { stdout: string }) => JSON.parse(out.stdout.trim().split('\n').at(-1)!) as { thetaHash: string; iterations: number; stoppedBy: { reason: string; detail: string; afterIteration: number } | null };

describe('a run budget', () => {
  it('looks one iteration ahead: stops when the spend so far plus one more like the last would pass a limit', () => {
    const row = { cost: { usd: 0.5, lambdaGbSeconds: 0, gpuSeconds: 0 }, counted: 10, failed: 2, durations: { manifest: 0, episodes: 0, collect: 0, update: 0, checkpoint: 0, total: 1_800_000 } };
    const one = spentAfter(NOTHING_SPENT, row);
    expect(one).toEqual({ usd: 0.5, episodes: 12, wallMs: 1_800_000 });
    const two = spentAfter(one, row);
    expect(budgetStop({ maxCostUsd: 1.5 }, two, one)).toBeNull();
    expect(budgetStop({ maxCostUsd: 1.4 }, two, one)).toMatch(/^budget: \$1\.0000 spent, and another iteration \(about \$0\.5000\) would pass maxCostUsd \$1\.4000$/);
    expect(budgetStop({ maxEpisodes: 30 }, two, one)).toMatch(/maxEpisodes 30/);
    expect(budgetStop({ maxHours: 1.4 }, two, one)).toMatch(/maxHours 1\.4/);
    expect(budgetStop({}, two, one)).toBeNull();
    expect(RunConfig.safeParse({ ...baseConfig, budget: { maxCostUsd: -1 } }).error?.issues[0]?.path).toEqual(['budget', 'maxCostUsd']);
    expect(RunConfig.safeParse({ ...baseConfig, budget: { maxDollars: 1 } }).success).toBe(false);
  });

  it('stops a trained run cleanly at maxEpisodes, checkpointed, and a resume with more reaches the unbudgeted θ', async () => {
    const store = join(root, 'store');
    const write = (name: string, config: object) => {
      const path = join(root, `${name}.json`);
      writeFileSync(path, JSON.stringify(config));
      return path;
    };
    const iterations = 4;
    // 6 members × 2 tasks = 12 episodes an iteration: 30 allows two, not a third
    const full = report(await esopt(['train', '--config', write('full', { ...baseConfig, iterations }), '--run', 'full', '--store', store, '--json']));
    const cut = await esopt(['train', '--config', write('cut', { ...baseConfig, iterations, budget: { maxEpisodes: 30 } }), '--run', 'cut', '--store', store, '--json']);
    expect(cut.code, cut.stderr).toBe(0);
    const stopped = report(cut);
    expect(stopped.stoppedBy).toMatchObject({ reason: 'budget', afterIteration: 1, detail: expect.stringContaining('24 episodes played, and another iteration (12) would pass maxEpisodes 30') });
    expect(stopped.iterations).toBe(2);
    const row1 = JSON.parse(readFileSync(join(store, keys.metricsRow('cut', 1)), 'utf8')) as { spent: { episodes: number } };
    expect(row1.spent.episodes).toBe(24);
    expect(JSON.parse(readFileSync(join(store, keys.checkpointMeta('cut', 2)), 'utf8'))).toMatchObject({ iteration: 2 });
    // a larger budget from the flags: the stored config is updated, then the run goes on from its checkpoint
    const resumed = report(await esopt(['train', '--resume', 'cut', '--max-episodes', '1000', '--store', store, '--json'])) as ReturnType<typeof report> & { changes: string[] };
    expect(resumed.changes).toEqual(['budget.maxEpisodes 30 → 1000']);
    expect(JSON.parse(readFileSync(join(store, keys.config('cut')), 'utf8')).budget).toEqual({ maxEpisodes: 1000 });
    expect(resumed.stoppedBy).toBeNull();
    expect(resumed.thetaHash).toBe(full.thetaHash);
  }, 90_000);
});
