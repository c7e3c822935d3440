/**
 * Cells from a horizon run's stores: for an ES run `NAME-h{H}-s{seed}` and its random-search run in a store
 * directory, the base and ES held-out results (evaluations of θ_0 and θ_final), ES's training curve (its
 * metrics rows), and random search's held-out results and best-so-far curve (its reward records). This is
 * how a run whose processes wrote stores but no cell files (results/horizon/device-run) is summarised.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { z } from 'zod';
import { EvaluationResult, MetricsRow, RewardRecord, RunConfig } from '../../../shared/schemas/index.ts';
import type { HorizonCell } from './horizon-cell.ts';

function read<T extends z.ZodType>(schema: T, path: string): z.infer<T> {
  const parsed = schema.safeParse(JSON.parse(readFileSync(path, 'utf8')));
  if (!parsed.success) throw new Error(`${path}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

const iterationDir = (k: number) => String(k).padStart(8, '0');

/** The cell of ES run `run` under `runsDir` (its store's runs/ directory). */
export function importCell(runsDir: string, run: string): HorizonCell {
  const dir = join(runsDir, run);
  const config = read(RunConfig, join(dir, 'config.json'));
  const threshold = config.successThreshold;
  const before = read(EvaluationResult, join(dir, 'evaluations', `${iterationDir(0)}.json`));
  const after = read(EvaluationResult, join(dir, 'evaluations', `${iterationDir(config.iterations)}.json`));
  const tasks = before.perTask.map((p) => p.task);
  if (after.perTask.map((p) => p.task).join() !== tasks.join()) throw new Error(`${run}: θ_0 and θ_final were evaluated on different tasks`);
  const solvedOf = (e: Array<{ reward: number; error: string | null }>) => e.map((p) => p.error === null && p.reward >= threshold);
  const perIteration = config.es.population * config.tasks.trainPerIteration;
  const rows = readdirSync(join(dir, 'metrics'))
    .filter((f) => f.endsWith('.json'))
    .map((f) => read(MetricsRow, join(dir, 'metrics', f)))
    .sort((a, b) => a.iteration - b.iteration);
  const blanks = (config.environment.options as { blanks?: unknown } | undefined)?.blanks;
  if (typeof blanks !== 'number') throw new Error(`${run}: the environment options name no blanks (the horizon)`);
  const cell: HorizonCell = {
    horizon: blanks,
    seed: config.seed,
    tasks,
    solved: { base: solvedOf(before.perTask), es: solvedOf(after.perTask) },
    trainingEpisodes: { es: rows.reduce((n, r) => n + r.counted, 0) },
    curves: { es: rows.filter((r) => r.successRate !== null).map((r) => ({ episodes: (r.iteration + 1) * perIteration, successRate: r.successRate! })) },
    wallMs: {},
  };

  const rsDir = join(runsDir, `${run}-random-search`, 'iterations');
  const rsEval = join(rsDir, iterationDir(config.iterations), 'rewards', 'base');
  if (existsSync(rsEval)) {
    const byTask = new Map(readdirSync(rsEval).map((f) => read(RewardRecord, join(rsEval, f))).map((r) => [r.task, r]));
    const missing = tasks.filter((t) => !byTask.has(t));
    if (missing.length) throw new Error(`${run}-random-search: no held-out record for ${missing.length} tasks (first ${missing[0]})`);
    cell.solved.randomSearch = solvedOf(tasks.map((t) => byTask.get(t)!));
    let best = -Infinity;
    let episodes = 0;
    cell.curves.randomSearch = [];
    for (let round = 0; round < config.iterations; round++) {
      const rewards = join(rsDir, iterationDir(round), 'rewards');
      const members = readdirSync(rewards).filter((m) => m !== 'base');
      for (const m of members) {
        const records = readdirSync(join(rewards, m)).map((f) => read(RewardRecord, join(rewards, m, f)));
        episodes += records.length;
        // As in random-search.ts: a failed episode scores 0, the mean is over the round's tasks.
        best = Math.max(best, records.reduce((a, r) => a + (r.error === null ? r.reward : 0), 0) / config.tasks.trainPerIteration);
      }
      cell.curves.randomSearch.push({ episodes: (round + 1) * perIteration, successRate: best });
    }
    cell.trainingEpisodes.randomSearch = episodes;
  }
  return cell;
}

/** Every cell in a directory of stores (each `*`/runs/NAME-h{H}-s{seed}). */
export function importCells(storesDir: string): HorizonCell[] {
  const cells: HorizonCell[] = [];
  for (const store of readdirSync(storesDir).sort()) {
    const runs = join(storesDir, store, 'runs');
    if (!existsSync(runs)) continue;
    for (const run of readdirSync(runs).filter((r) => /-h\d+-s\d+$/.test(r))) cells.push(importCell(runs, run));
  }
  return cells;
}
