/**
 * The scalars a run shows where people watch it (TensorBoard, MLflow, Weights & Biases), one list for all
 * three: every number of an iteration's metrics row and of an evaluation (shared/schemas/metrics.ts), under
 * one tag each, nothing computed that the records do not hold. A field the row leaves null or absent (no
 * counted episode: no reward; rows from before σ and α were recorded) is left out, never sent as 0.
 */
import type { EvaluationResult, MetricsRow } from '../../../shared/schemas/index.ts';

export interface Scalar {
  tag: string;
  value: number;
}

type Field<T> = readonly [tag: string, read: (x: T) => number | null | undefined];

/** An iteration's row, at step = its iteration. */
export const ROW_SCALARS: ReadonlyArray<Field<MetricsRow>> = [
  // Reward statistics of the counted episodes, as the row has them (mean and max; the row keeps no std or min).
  ['reward/mean', (r) => r.meanReward],
  ['reward/max', (r) => r.maxReward],
  ['train/success_rate', (r) => r.successRate],
  ['episodes/expected', (r) => r.expected],
  ['episodes/counted', (r) => r.counted],
  ['episodes/failed', (r) => r.failed],
  ['episodes/invalid', (r) => r.invalid],
  ['episodes/missing', (r) => r.missing],
  ['episodes/timed_out', (r) => r.timedOut],
  ['es/sigma', (r) => r.sigma],
  ['es/alpha', (r) => r.alpha],
  ['tokens/prompt', (r) => r.tokens.prompt],
  ['tokens/completion', (r) => r.tokens.completion],
  ['cost/usd', (r) => r.cost.usd],
  ['cost/lambda_gb_seconds', (r) => r.cost.lambdaGbSeconds],
  ['cost/gpu_seconds', (r) => r.cost.gpuSeconds],
  ['time_ms/manifest', (r) => r.durations.manifest],
  ['time_ms/episodes', (r) => r.durations.episodes],
  ['time_ms/collect', (r) => r.durations.collect],
  ['time_ms/update', (r) => r.durations.update],
  ['time_ms/checkpoint', (r) => r.durations.checkpoint],
  ['time_ms/total', (r) => r.durations.total],
  ['spent/usd', (r) => r.spent?.usd],
  ['spent/episodes', (r) => r.spent?.episodes],
  ['spent/wall_ms', (r) => r.spent?.wallMs],
];

/** An evaluation of θ_k (held-out greedy episodes), at step = k. */
export const EVALUATION_SCALARS: ReadonlyArray<Field<EvaluationResult>> = [
  ['eval/success_rate', (e) => e.successRate],
  // the 95% Wilson interval of the success rate
  ['eval/success_rate_lower', (e) => e.interval.low],
  ['eval/success_rate_upper', (e) => e.interval.high],
  ['eval/mean_reward', (e) => e.meanReward],
  ['eval/tasks', (e) => e.tasks],
  ['eval/successes', (e) => e.successes],
  ['eval/failed', (e) => e.failed],
  ['eval/duration_ms', (e) => e.durationMs],
];

function scalars<T>(fields: ReadonlyArray<Field<T>>, x: T): Scalar[] {
  const out: Scalar[] = [];
  for (const [tag, read] of fields) {
    const value = read(x);
    if (typeof value === 'number' && Number.isFinite(value)) out.push({ tag, value });
  }
  return out;
}

export const rowScalars = (row: MetricsRow): Scalar[] => scalars(ROW_SCALARS, row);
export const evaluationScalars = (e: EvaluationResult): Scalar[] => scalars(EVALUATION_SCALARS, e);
