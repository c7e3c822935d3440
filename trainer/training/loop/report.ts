/** The end-of-run report: what was trained, how it went, where the evidence is. Built from the store's rows. */
import { z } from 'zod';
import { EvaluationResult, RunConfig } from '../../../shared/schemas/index.ts';
import type { TrainingResult } from './training.ts';
import { Provenance, provenance } from '../provenance.ts';

export const TrainingReport = z.object({
  run: z.string(),
  config: RunConfig,
  iterations: z.number().int(),
  thetaHash: z.string(),
  resumedAt: z.number().int(),
  /** Set when the run stopped at its budget before its last iteration. */
  stoppedBy: z.object({ reason: z.literal('budget'), detail: z.string(), afterIteration: z.number().int() }).nullable().default(null),
  evaluations: z.array(EvaluationResult.pick({ iteration: true, successRate: true, interval: true, meanReward: true, tasks: true, successes: true })),
  evaluationFirst: EvaluationResult.pick({ iteration: true, successRate: true, interval: true }).nullable(),
  evaluationLast: EvaluationResult.pick({ iteration: true, successRate: true, interval: true }).nullable(),
  rewardFirst: z.number().nullable(),
  rewardLast: z.number().nullable(),
  perIteration: z.array(z.object({ iteration: z.number().int(), meanReward: z.number().nullable(), counted: z.number().int(), failed: z.number().int(), totalMs: z.number() })),
  totals: z.object({
    episodes: z.number().int(),
    failed: z.number().int(),
    tokens: z.object({ prompt: z.number().int(), completion: z.number().int() }),
    costUsd: z.number(),
    wallMs: z.number(),
    /** Share of iteration wall time outside episodes (manifest, collection, update, checkpoint). */
    overheadRatio: z.number().nullable(),
  }),
  files: z.object({ report: z.string(), curve: z.string() }),
  /** The commit, date and load the report was made at. */
  made: Provenance,
});
export type TrainingReport = z.infer<typeof TrainingReport>;

export function buildReport(config: RunConfig, result: TrainingResult, files: TrainingReport['files']): TrainingReport {
  const rows = result.rows;
  const ev = result.evaluations;
  const pick = (e: EvaluationResult | undefined) => (e ? { iteration: e.iteration, successRate: e.successRate, interval: e.interval } : null);
  const timed = rows.filter((r) => r.durations.total > 0);
  const total = timed.reduce((a, r) => a + r.durations.total, 0);
  const episodes = timed.reduce((a, r) => a + r.durations.episodes, 0);
  return TrainingReport.parse({
    run: result.run,
    config,
    iterations: rows.length,
    thetaHash: result.thetaHash,
    resumedAt: result.resumedAt,
    stoppedBy: result.stoppedBy,
    evaluations: ev.map((e) => ({ iteration: e.iteration, successRate: e.successRate, interval: e.interval, meanReward: e.meanReward, tasks: e.tasks, successes: e.successes })),
    evaluationFirst: pick(ev[0]),
    evaluationLast: pick(ev[ev.length - 1]),
    rewardFirst: rows[0]?.meanReward ?? null,
    rewardLast: rows[rows.length - 1]?.meanReward ?? null,
    perIteration: rows.map((r) => ({ iteration: r.iteration, meanReward: r.meanReward, counted: r.counted, failed: r.failed, totalMs: r.durations.total })),
    totals: {
      episodes: rows.reduce((a, r) => a + r.counted + (config.failedEpisodeReward === null ? r.failed : 0), 0),
      failed: rows.reduce((a, r) => a + r.failed, 0),
      tokens: rows.reduce((a, r) => ({ prompt: a.prompt + r.tokens.prompt, completion: a.completion + r.tokens.completion }), { prompt: 0, completion: 0 }),
      costUsd: rows.reduce((a, r) => a + r.cost.usd, 0),
      wallMs: total,
      overheadRatio: total > 0 ? (total - episodes) / total : null,
    },
    files,
    made: provenance(),
  });
}
