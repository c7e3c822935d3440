/**
 * `esopt experiment horizon`: at each horizon H and seed, the base agent, ES (the project's loop), GRPO
 * (trainer/studies/grpo) and best-of-N random search (trainer/studies/demo/random-search.ts), all from the same θ₀ with the
 * same training tasks and episode budget, judged greedily on the same held-out tasks. Each (H, seed) cell's
 * JSON is rewritten as soon as each of its methods finishes, and the summary after every cell, so a run
 * cut short still leaves every finished result.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import type { EvaluationResult, RunConfig } from '../../../shared/schemas/index.ts';
import { loadEnvironment } from '../../../environments/index.ts';
import { heldOutTasks } from '../../../environments/task-sampler.ts';
import { openStudyRun, runEmbedded } from '../../assembly/run.ts';
import { silentProgress } from '../../training/loop/index.ts';
import { randomSearch } from '../demo/random-search.ts';
import { runGrpo } from '../grpo/grpo.ts';
import { runConfigAt, type HorizonExperimentConfig } from './horizon-config.ts';
import { HorizonCell, mergeCell, type TrainedMethod } from './horizon-cell.ts';

function solved(e: EvaluationResult, threshold: number): boolean[] {
  return e.perTask.map((p) => p.error === null && p.reward >= threshold);
}

const load = () => loadavg()[0].toFixed(1);

async function runCell(c: HorizonExperimentConfig, config: RunConfig, methods: ReadonlySet<TrainedMethod>, storeRoot: string, save: (cell: HorizonCell) => void, log: (s: string) => void): Promise<HorizonCell> {
  const run = config.name!;
  const th = config.successThreshold;
  const perIteration = config.es.population * config.tasks.trainPerIteration;
  const environment = await loadEnvironment(config.environment.name);
  const options = environment.optionsSchema.parse(config.environment.options);
  const heldOut = heldOutTasks(environment, config.tasks.evalSplit, config.tasks.evalCount, config.tasks.seed, options).map((x) => ({ id: x.id, task: x.task }));
  const cell: HorizonCell = {
    horizon: Number((options as { blanks: number }).blanks),
    seed: config.seed,
    tasks: heldOut.map((x) => x.id),
    solved: {},
    trainingEpisodes: {},
    curves: {},
    wallMs: {},
  };

  let t = performance.now();
  if (methods.has('es')) {
    log(`${run}: ES starts (${config.iterations} iterations, load ${load()})`);
    const es = await runEmbedded({ config, run, storeRoot, progress: silentProgress });
    cell.wallMs.es = performance.now() - t;
    const before = es.result.evaluations.find((e) => e.iteration === 0);
    const after = es.result.evaluations.find((e) => e.iteration === config.iterations);
    if (!before || !after) throw new Error(`run ${run} has no evaluation of θ_0 or θ_${config.iterations}`);
    if (heldOut.some((x, i) => x.id !== before.perTask[i]?.task)) throw new Error("held-out tasks differ from the ES run's evaluation tasks");
    cell.solved.base = solved(before, th);
    cell.solved.es = solved(after, th);
    cell.trainingEpisodes.es = es.report.totals.episodes;
    cell.curves.es = es.result.rows.filter((r) => r.successRate !== null).map((r) => ({ episodes: (r.iteration + 1) * perIteration, successRate: r.successRate! }));
    save(cell);
    log(`${run}: ES ${before.successRate.toFixed(3)} → ${after.successRate.toFixed(3)} (${(cell.wallMs.es / 1000).toFixed(0)} s, load ${load()})`);
  }

  if (methods.has('randomSearch')) {
    t = performance.now();
    const served = await openStudyRun(config, storeRoot);
    const rsCurve: Array<{ episodes: number; successRate: number }> = [];
    let rs;
    try {
      rs = await randomSearch({
        run: `${run}-random-search`,
        config,
        store: served.site.store,
        fanout: served.site.fanout,
        engine: served.engine,
        population: served.server.service,
        policy: { baseUrl: `${served.server.url}/v1` },
        environment,
        evalTasks: heldOut,
        onRound: (round, best) => rsCurve.push({ episodes: (round + 1) * perIteration, successRate: best.reward }),
      });
    } finally {
      await served.close();
  }
  cell.wallMs.randomSearch = performance.now() - t;
  cell.solved.randomSearch = solved(rs.evaluation, th);
  cell.trainingEpisodes.randomSearch = rs.episodes;
  cell.curves.randomSearch = rsCurve;
  save(cell);
  log(`${run}: random search → ${rs.evaluation.successRate.toFixed(3)} (${(cell.wallMs.randomSearch / 1000).toFixed(0)} s, load ${load()})`);
  }

  if (methods.has('grpo')) {
    t = performance.now();
    const grpo = await runGrpo({
      config,
      grpo: c.grpo,
      run: `${run}-grpo`,
      storeRoot,
      evalTasks: heldOut,
      onStep: (s) => log(`${run}: GRPO step ${s.step} reward ${s.meanReward.toFixed(3)}, ${s.kl === null ? '' : `KL ${s.kl.toFixed(4)}, `}${s.merged}/${s.sequences} sequences, rollouts ${(s.rolloutMs / 1000).toFixed(1)} s, gradient ${(s.gradientMs / 1000).toFixed(1)} s`),
    });
    cell.wallMs.grpo = performance.now() - t;
    cell.solved.grpo = solved(grpo.evaluation, th);
    cell.trainingEpisodes.grpo = grpo.episodes;
    cell.curves.grpo = grpo.history.map((s) => ({ episodes: (s.step + 1) * c.grpo.group * config.tasks.trainPerIteration, successRate: s.meanReward }));
    save(cell);
    log(`${run}: GRPO → ${grpo.evaluation.successRate.toFixed(3)} (${(cell.wallMs.grpo / 1000).toFixed(0)} s, load ${load()})`);
  }
  return cell;
}

export async function runHorizonExperiment(
  c: HorizonExperimentConfig,
  o: { out: string; storeRoot: string; log: (s: string) => void; methods?: readonly TrainedMethod[]; onCell?: (cells: readonly HorizonCell[]) => void },
): Promise<HorizonCell[]> {
  mkdirSync(o.out, { recursive: true });
  const cells: HorizonCell[] = [];
  // Seeds outermost: a run cut short still has every horizon at its first seeds.
  for (const seed of c.seeds) {
    for (const horizon of c.horizons) {
      const file = join(o.out, `h${horizon}-s${seed}.json`);
      const earlier = existsSync(file) ? HorizonCell.parse(JSON.parse(readFileSync(file, 'utf8'))) : null;
      let merged: HorizonCell | null = null;
      const save = (cell: HorizonCell) => writeFileSync(file, JSON.stringify((merged = mergeCell(earlier, cell)), null, 1));
      const methods = new Set(o.methods ?? (['es', 'randomSearch', 'grpo'] as const));
      await runCell(c, runConfigAt(c, horizon, seed), methods, o.storeRoot, save, o.log);
      if (!merged) throw new Error('no method ran');
      cells.push(merged);
      o.onCell?.(cells);
    }
  }
  return cells;
}
