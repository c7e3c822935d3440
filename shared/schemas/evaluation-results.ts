/**
 * An evaluation's result file and the comparison of several (docs/API.md, "Result files and comparing
 * agents"). The result file is a stable, versioned format another team can check without our code: what was
 * played (the suite, its content hash, a hash of each task), how it was judged (environment, judge version,
 * success threshold) and each episode's outcome, from which the summary can be recomputed. A change that
 * would make an old reader misread a file makes a new `version`; fields are only ever added.
 */
import { z } from 'zod';
import { Id, TaskId } from './ids.ts';
import { Sha256 } from './model-store.ts';
import { EnvironmentName } from './run-config.ts';
import { InstructionsName } from './instructions.ts';
import { StoredEvaluationRequest } from './http-api.ts';

export const RESULT_FILE_VERSION = 1;

/** How an episode became a success: the environment's reward (its judge, by version) against a threshold. */
export const JudgeRef = z
  .object({
    environment: EnvironmentName,
    /** The version of how `environment` turns an episode into its reward (environments/judge-versions.ts). */
    version: z.number().int().min(1),
    /** An episode succeeded when it ended without error with reward ≥ this. */
    successThreshold: z.number().finite(),
  })
  .strict()
  .meta({ id: 'JudgeRef' });
export type JudgeRef = z.infer<typeof JudgeRef>;

/** What was played: the same `tasksSha256` (and environment) is the same tasks, in the same order. */
export const SuiteRef = z
  .object({
    /** A pushed suite's name; otherwise what generated the tasks, e.g. "sudoku eval split" or "explicit tasks". */
    name: z.string().min(1),
    /** A pushed suite's manifest sha256 (its content hash, `esopt tasks show`); null for tasks no suite holds. */
    manifest: Sha256.nullable(),
    environment: EnvironmentName,
    /** The split the tasks were drawn from; null for explicit tasks. */
    split: z.enum(['train', 'eval', 'validation']).nullable(),
    tasks: z.number().int().min(1),
    /** sha256 of the canonical JSON (RFC 8785) of `[{ id, sha256 }, …]`: every task's id and hash, in the order played. */
    tasksSha256: Sha256,
  })
  .strict()
  .meta({ id: 'SuiteRef' });
export type SuiteRef = z.infer<typeof SuiteRef>;

export const ResultEpisode = z
  .object({
    index: z.number().int().min(0),
    round: z.number().int().min(0),
    reward: z.number().finite(),
    success: z.boolean(),
    steps: z.number().int().min(0),
    error: z.string().nullable(),
    costUsd: z.number().min(0),
  })
  .strict();

export const ResultTask = z
  .object({
    id: TaskId,
    /** sha256 of the task's canonical JSON (RFC 8785): check it against your copy of the suite. */
    sha256: Sha256,
    episodes: z.array(ResultEpisode),
  })
  .strict();

export const EvaluationResultFile = z
  .object({
    version: z.literal(RESULT_FILE_VERSION),
    evaluation: Id,
    createdAt: z.iso.datetime(),
    state: z.enum(['queued', 'running', 'finished', 'failed']),
    stopReason: z.enum(['completed', 'max-episodes', 'max-cost']).nullable(),
    /** The agent (an external endpoint's key never appears: `hasApiKey` says whether it had one). */
    model: StoredEvaluationRequest.shape.model,
    /** The environment's options: what the agent saw and how it answered (they may differ between compared agents). */
    environmentOptions: z.record(z.string(), z.unknown()),
    /** The instructions (c_t) every episode ran under, pinned; null: each environment's own prompt. */
    instructions: z.object({ name: InstructionsName, manifest: Sha256.nullable() }).strict().nullable(),
    suite: SuiteRef,
    judge: JudgeRef,
    summary: z
      .object({
        episodes: z.number().int().min(0),
        successes: z.number().int().min(0),
        failed: z.number().int().min(0),
        successRate: z.number().min(0).max(1),
        /** 95% Wilson score interval of the success rate. */
        interval: z.object({ low: z.number().min(0).max(1), high: z.number().min(0).max(1) }),
        meanReward: z.number().finite().nullable(),
        totalCostUsd: z.number().min(0),
        meanCostUsdPerEpisode: z.number().min(0).nullable(),
      })
      .strict(),
    /** Every task of the suite in the order played, with the episodes that played it (none where the budget stopped first). */
    tasks: z.array(ResultTask),
  })
  .strict()
  .meta({ id: 'EvaluationResultFile' });
export type EvaluationResultFile = z.infer<typeof EvaluationResultFile>;

export const ComparedEvaluation = z
  .object({
    id: Id,
    model: StoredEvaluationRequest.shape.model,
    state: z.enum(['queued', 'running', 'finished', 'failed']),
    environmentOptions: z.record(z.string(), z.unknown()),
    episodes: z.number().int().min(1),
    successes: z.number().int().min(0),
    successRate: z.number().min(0).max(1),
    interval: z.object({ low: z.number().min(0).max(1), high: z.number().min(0).max(1) }),
    meanCostUsdPerEpisode: z.number().min(0),
    totalCostUsd: z.number().min(0),
    /** No other evaluation is at least as successful and at most as costly, and better in one of the two. */
    frontier: z.boolean(),
    /** The evaluations that are (by their point estimates). */
    dominatedBy: z.array(Id),
  })
  .strict()
  .meta({ id: 'ComparedEvaluation' });
export type ComparedEvaluation = z.infer<typeof ComparedEvaluation>;

export const EvaluationComparison = z
  .object({
    version: z.literal(RESULT_FILE_VERSION),
    suite: SuiteRef,
    judge: JudgeRef,
    /** In the order asked for. */
    evaluations: z.array(ComparedEvaluation).min(2),
    /** The Pareto frontier's ids, cheapest first. */
    frontier: z.array(Id).min(1),
  })
  .strict()
  .meta({ id: 'EvaluationComparison' });
export type EvaluationComparison = z.infer<typeof EvaluationComparison>;
