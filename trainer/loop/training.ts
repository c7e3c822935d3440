/**
 * The ES loop: resume (resume.ts), then per iteration k an evaluation when one is due
 * (evaluation-schedule.ts), the iteration itself (iteration.ts) and its metrics row; after the last
 * update, the final evaluation. Everything a later iteration depends on is in the store, so a run
 * killed at any point resumes exactly.
 */
import { keys } from '../../shared/keys.ts';
import type { EvaluationResult, MetricsRow } from '../../shared/schemas/index.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { EvaluationSchedule } from './evaluation-schedule.ts';
import type { FaultHook } from './fault-points.ts';
import { runIteration } from './iteration.ts';
import type { LoopContext, PopulationHost } from './loop-context.ts';
import { readRows } from './metrics-row.ts';
import type { WeightHost } from './restore.ts';
import { claimRunConfig, resume } from './resume.ts';
import { putJson } from './stored-json.ts';

export type { PopulationHost, WeightHost };
export { readRunConfig } from './resume.ts';

/** The loop's parts as the caller has them: the environment's options are parsed here, polling and faults default. */
export type TrainingOptions = Omit<LoopContext, 'environmentOptions' | 'pollMs' | 'faults'> & {
  pollMs?: number;
  faults?: FaultHook;
  onStart?: (info: { resumedAt: number; replayed: number; skippedCheckpoints: Array<{ iteration: number; reason: string }> }) => void;
  onIteration?: (row: MetricsRow) => void;
  onEvaluation?: (result: EvaluationResult) => void;
};

export interface TrainingResult {
  run: string;
  rows: MetricsRow[];
  evaluations: EvaluationResult[];
  thetaHash: string;
  resumedAt: number;
}

export async function train(o: TrainingOptions): Promise<TrainingResult> {
  const { run, config, store, weights } = o;
  const ctx: LoopContext = {
    run,
    config,
    store,
    fanout: o.fanout,
    weights,
    population: o.population,
    policy: o.policy,
    environment: o.environment,
    environmentOptions: o.environment.optionsSchema.parse(config.environment.options),
    replicas: o.replicas,
    pollMs: o.pollMs ?? 100,
    faults: o.faults ?? (() => {}),
  };
  await claimRunConfig(store, run, config);
  const resumed = await resume(ctx);
  o.onStart?.({ resumedAt: resumed.next, replayed: resumed.replayed, skippedCheckpoints: resumed.skippedCheckpoints });

  const evaluations = new EvaluationSchedule(ctx, o.onEvaluation);
  for (let k = resumed.next; k < config.iterations; k++) {
    const row = await runIteration(ctx, k, await evaluations.before(k));
    await putJson(store, keys.metricsRow(run, k), row);
    o.onIteration?.(row);
  }
  await evaluations.final();
  // The last update is checked too: a run never ends with a replica holding another θ.
  await o.replicas?.check(config.iterations, hashTheta(weights.segments()));

  return { run, rows: await readRows(store, run, config.iterations), evaluations: await evaluations.all(), thetaHash: hashTheta(weights.segments()), resumedAt: resumed.next };
}
