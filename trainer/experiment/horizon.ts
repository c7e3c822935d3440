/**
 * `esopt experiment horizon`: at each horizon H and seed, the base agent, ES (the project's loop), GRPO
 * (trainer/grpo) and best-of-N random search (trainer/demo/random-search.ts), all from the same θ₀ with the
 * same training tasks and episode budget, judged greedily on the same held-out tasks. Each (H, seed) cell
 * is written as raw JSON as soon as it finishes, so a partial run still leaves its results.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EvaluationResult, RunConfig } from '../../shared/schemas/index.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { localRunTarget } from '../fanout/local-target.ts';
import { runEmbedded, serveModel } from '../loop/embedded-run.ts';
import { silentProgress } from '../loop/progress.ts';
import { randomSearch } from '../demo/random-search.ts';
import { runGrpo, type GrpoStepRecord } from '../grpo/grpo.ts';
import { runConfigAt, type HorizonExperimentConfig } from './horizon-config.ts';

export const METHODS = ['base', 'es', 'grpo', 'randomSearch'] as const;
export type Method = (typeof METHODS)[number];

export interface HorizonCell {
  horizon: number;
  seed: number;
  tasks: string[];
  /** Per held-out task: solved (reward ≥ threshold, no error). */
  solved: Record<Method, boolean[]>;
  trainingEpisodes: Record<Exclude<Method, 'base'>, number>;
  /** ES: held-out success at each evaluation; GRPO: mean training reward per step. */
  curves: { es: Array<{ iteration: number; successRate: number }>; esReward: Array<{ iteration: number; meanReward: number | null }>; grpo: GrpoStepRecord[] };
  wallMs: Record<Exclude<Method, 'base'>, number>;
}

function solved(e: EvaluationResult, threshold: number): boolean[] {
  return e.perTask.map((p) => p.error === null && p.reward >= threshold);
}

async function runCell(c: HorizonExperimentConfig, config: RunConfig, storeRoot: string, log: (s: string) => void): Promise<HorizonCell> {
  const run = config.name!;
  let t = performance.now();
  const es = await runEmbedded({ config, run, storeRoot, progress: silentProgress });
  const esMs = performance.now() - t;
  const before = es.result.evaluations.find((e) => e.iteration === 0);
  const after = es.result.evaluations.find((e) => e.iteration === config.iterations);
  if (!before || !after) throw new Error(`run ${run} has no evaluation of θ_0 or θ_${config.iterations}`);
  log(`${run}: ES ${before.successRate.toFixed(3)} → ${after.successRate.toFixed(3)} (${(esMs / 1000).toFixed(0)} s)`);
  const environment = await loadEnvironment(config.environment.name);
  const options = environment.optionsSchema.parse(config.environment.options);
  const heldOut = environment.sampleTasks('eval', config.tasks.evalCount, config.tasks.seed, options).map((x) => ({ id: x.id, task: x.task }));
  if (heldOut.some((x, i) => x.id !== before.perTask[i]?.task)) throw new Error('held-out tasks differ from the ES run\'s evaluation tasks');

  t = performance.now();
  const served = await serveModel(config);
  const target = localRunTarget(storeRoot, { workers: config.workers });
  let rs;
  try {
    rs = await randomSearch({
      run: `${run}-random-search`,
      config,
      store: target.store,
      fanout: target.fanout,
      engine: served.engine,
      population: served.server.service,
      policy: { baseUrl: `${served.server.url}/v1` },
      environment,
      evalTasks: heldOut,
    });
  } finally {
    await target.close();
    await served.close();
  }
  const rsMs = performance.now() - t;
  log(`${run}: random search → ${rs.evaluation.successRate.toFixed(3)} (${(rsMs / 1000).toFixed(0)} s)`);

  t = performance.now();
  const grpo = await runGrpo({ config, grpo: c.grpo, run: `${run}-grpo`, storeRoot, evalTasks: heldOut });
  const grpoMs = performance.now() - t;
  log(`${run}: GRPO → ${grpo.evaluation.successRate.toFixed(3)} (${(grpoMs / 1000).toFixed(0)} s)`);

  const th = config.successThreshold;
  return {
    horizon: config.environment.options ? Number((config.environment.options as { blanks: number }).blanks) : 0,
    seed: config.seed,
    tasks: heldOut.map((x) => x.id),
    solved: { base: solved(before, th), es: solved(after, th), grpo: solved(grpo.evaluation, th), randomSearch: solved(rs.evaluation, th) },
    trainingEpisodes: { es: es.report.totals.episodes, grpo: grpo.episodes, randomSearch: rs.episodes },
    curves: {
      es: es.result.evaluations.map((e) => ({ iteration: e.iteration, successRate: e.successRate })),
      esReward: es.result.rows.map((m) => ({ iteration: m.iteration, meanReward: m.meanReward })),
      grpo: grpo.history,
    },
    wallMs: { es: esMs, grpo: grpoMs, randomSearch: rsMs },
  };
}

export async function runHorizonExperiment(c: HorizonExperimentConfig, o: { out: string; storeRoot: string; log: (s: string) => void }): Promise<HorizonCell[]> {
  mkdirSync(o.out, { recursive: true });
  const cells: HorizonCell[] = [];
  // Seeds outermost: a run cut short still has every horizon at its first seeds.
  for (const seed of c.seeds) {
    for (const horizon of c.horizons) {
      const cell = await runCell(c, runConfigAt(c, horizon, seed), o.storeRoot, o.log);
      writeFileSync(join(o.out, `h${horizon}-s${seed}.json`), JSON.stringify(cell, null, 1));
      cells.push(cell);
    }
  }
  return cells;
}
