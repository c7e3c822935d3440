/**
 * The ES loop: resume (resume.ts), then per iteration k an evaluation when one is due
 * (evaluation-schedule.ts), the iteration itself (iteration.ts) and its metrics row; after the last
 * update, the final evaluation. Everything a later iteration depends on is in the store, so a run
 * killed at any point resumes exactly.
 */
import { keys } from '../../../shared/keys.ts';
import type { EvaluationResult, MetricsRow } from '../../../shared/schemas/index.ts';
import { budgetStop, NOTHING_SPENT, spentAfter } from './budget.ts';
import { writeCheckpoint } from './checkpoints.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import { EvaluationSchedule } from './evaluation-schedule.ts';
import type { FaultHook } from './fault-points.ts';
import { runIteration } from './iteration.ts';
import type { LoopContext, LivePopulation } from './loop-context.ts';
import { readRows } from './metrics-row.ts';
import type { ThetaHolder } from './restore.ts';
import { claimRunConfig, resume } from './resume.ts';
import { openRunTasks, pinRunSuite } from './run-tasks.ts';
import { openRunInstructions, pinRunInstructions } from './run-instructions.ts';
import { pinRunOptions } from './run-options.ts';
import { writeJson } from '../../../shared/store/json.ts';

export type { LivePopulation, ThetaHolder };
export { readRunConfig } from './resume.ts';

/** The loop's parts as the caller has them: the environment's options are parsed here, polling and faults default. */
export type TrainingOptions = Omit<LoopContext, 'environmentOptions' | 'tasks' | 'instructions' | 'pollMs' | 'faults'> & {
  pollMs?: number;
  faults?: FaultHook;
  onStart?: (info: { resumedAt: number; replayed: number; skippedCheckpoints: Array<{ iteration: number; reason: string }> }) => void;
  onIteration?: (row: MetricsRow) => void;
  onEvaluation?: (result: EvaluationResult) => void;
};

export interface TrainingResult {
  run: string;
  /** Set when the run stopped before its last iteration at its budget (the sentence says which limit). */
  stoppedBy: { reason: 'budget'; detail: string; afterIteration: number } | null;
  rows: MetricsRow[];
  evaluations: EvaluationResult[];
  thetaHash: string;
  resumedAt: number;
}

export async function train(o: TrainingOptions): Promise<TrainingResult> {
  const { run, store, weights } = o;
  // A suite named without a manifest is pinned now (or to the one this run was stored with), before the claim.
  const config = await pinRunOptions(store, run, await pinRunInstructions(store, run, await pinRunSuite(store, run, o.config)), o.environment);
  const environmentOptions = o.environment.optionsSchema.parse(config.environment.options);
  const ctx: LoopContext = {
    run,
    config,
    store,
    fanout: o.fanout,
    weights,
    population: o.population,
    policy: o.policy,
    environment: o.environment,
    environmentOptions,
    tasks: await openRunTasks(store, config, o.environment, environmentOptions),
    instructions: await openRunInstructions(store, config),
    replicas: o.replicas,
    pollMs: o.pollMs ?? 100,
    faults: o.faults ?? (() => {}),
  };
  // a target pattern that names no tensor fails here, before anything is stored
  weights.targetTensors?.(config.targets);
  await claimRunConfig(store, run, config);
  const resumed = await resume(ctx);
  o.onStart?.({ resumedAt: resumed.next, replayed: resumed.replayed, skippedCheckpoints: resumed.skippedCheckpoints });

  const evaluations = new EvaluationSchedule(ctx, o.onEvaluation);
  // Summed from the rows themselves: a row rebuilt on resume (metrics-row.ts) carries no running total.
  let spent = (await readRows(store, run, resumed.next)).reduce(spentAfter, NOTHING_SPENT);
  for (let k = resumed.next; k < config.iterations; k++) {
    const ran = await runIteration(ctx, k, await evaluations.before(k));
    const row: MetricsRow = { ...ran, spent: spentAfter(spent, ran) };
    spent = row.spent!;
    await writeJson(store, keys.metricsRow(run, k), row);
    o.onIteration?.(row);
    const stop = k + 1 < config.iterations ? budgetStop(config.budget, spent, spentAfter(NOTHING_SPENT, ran)) : null;
    if (stop) {
      // A clean stop: θ_{k+1} checkpointed (unless this iteration just did), so a resume with a larger budget starts here.
      if (!(await store.get(keys.checkpointMeta(run, k + 1)))) await writeCheckpoint(store, run, k + 1, weights.segments());
      return { run, stoppedBy: { reason: 'budget', detail: stop, afterIteration: k }, rows: await readRows(store, run, k + 1), evaluations: await evaluations.all(), thetaHash: hashTheta(weights.segments()), resumedAt: resumed.next };
    }
  }
  await evaluations.final();
  // The last update is checked too: a run never ends with a replica holding another θ.
  await o.replicas?.check(config.iterations, hashTheta(weights.segments()));

  return { run, stoppedBy: null, rows: await readRows(store, run, config.iterations), evaluations: await evaluations.all(), thetaHash: hashTheta(weights.segments()), resumedAt: resumed.next };
}
