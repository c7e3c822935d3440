import { TopError } from '../error-tally.ts';
import { z } from 'zod';
import { Iteration, RunId, TaskId } from './ids.ts';
import { Cost } from './episode.ts';

/** Success rate of greedy base-model episodes on the held-out tasks, with a 95% Wilson interval. */
export const EvaluationResult = z.object({
  run: RunId,
  /** θ_k: the weights after k updates (0 = before training). */
  iteration: Iteration,
  thetaHash: z.string(),
  tasks: z.number().int().min(0),
  successes: z.number().int().min(0),
  failed: z.number().int().min(0),
  successRate: z.number().min(0).max(1),
  interval: z.object({ low: z.number().min(0).max(1), high: z.number().min(0).max(1) }),
  meanReward: z.number().finite(),
  perTask: z.array(z.object({ task: TaskId, reward: z.number().finite(), error: z.string().nullable() })),
  durationMs: z.number().min(0),
});
export type EvaluationResult = z.infer<typeof EvaluationResult>;

/** Wall time of an iteration's phases, in milliseconds; everything but `episodes` is the loop's overhead. */
export const PhaseDurations = z.object({
  manifest: z.number().min(0),
  /** From fan-out until the last episode settled. */
  episodes: z.number().min(0),
  /** From the last episode settling until collection closed (listing, reading, polling slack). */
  collect: z.number().min(0),
  update: z.number().min(0),
  checkpoint: z.number().min(0),
  total: z.number().min(0),
});
export type PhaseDurations = z.infer<typeof PhaseDurations>;

/** One row per iteration: what the progress bar, the report and the curve are drawn from. */
export const MetricsRow = z.object({
  run: RunId,
  iteration: Iteration,
  expected: z.number().int().min(0),
  counted: z.number().int().min(0),
  failed: z.number().int().min(0),
  invalid: z.number().int().min(0),
  /**
   * Episodes of the manifest with no usable record at the close (none, or only an invalid one). Rows
   * written before `missing` and `timedOut` existed read as 0.
   */
  missing: z.number().int().min(0).default(0),
  /**
   * Of `missing`, those that ran out of time: their per-episode limit passed (the worker killed, no record
   * within the limit) or the iteration closed while they ran. The rest failed to dispatch. 0 in a row
   * rebuilt after a crash (the fan-out's outcomes died with the process).
   */
  timedOut: z.number().int().min(0).default(0),
  /** The most common error of the iteration's failed episodes (rows written before it existed have none). */
  topError: TopError.nullable().optional(),
  meanReward: z.number().finite().nullable(),
  maxReward: z.number().finite().nullable(),
  successRate: z.number().min(0).max(1).nullable(),
  tokens: z.object({ prompt: z.number().int().min(0), completion: z.number().int().min(0) }),
  cost: Cost,
  durations: PhaseDurations,
  thetaHashAfter: z.string(),
  /** Spent by the run up to and including this iteration (rows written before it existed have none). */
  spent: z.object({ usd: z.number().min(0), episodes: z.number().int().min(0), wallMs: z.number().min(0) }).optional(),
  /** The iteration's σ and α (their schedules' values; rows written before schedules existed have none). */
  sigma: z.number().positive().optional(),
  alpha: z.number().positive().optional(),
  /** The evaluation of θ_iteration (before this iteration's update), when one was due. */
  evaluation: EvaluationResult.nullable(),
  finishedAt: z.iso.datetime(),
});
export type MetricsRow = z.infer<typeof MetricsRow>;
