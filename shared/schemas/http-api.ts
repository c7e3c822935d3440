/**
 * The HTTP API's bodies: what `POST /runs`, `POST /evaluations` and the GET routes accept and answer.
 * These schemas are the request validation, the TypeScript types and the OpenAPI document at once.
 */
import { TopError } from '../error-tally.ts';
import { z } from 'zod';
import { CheckpointMeta } from './checkpoint.ts';
import { Cost } from './episode.ts';
import { Id, Iteration, RunId, Seed, TaskId } from './ids.ts';
import { EvaluationResult, MetricsRow } from './metrics.ts';
import { EnvironmentSpec, GenerationOptions, ModelSpec, RunConfig } from './run-config.ts';
import { TaskSuiteChoice } from './task-suite-ref.ts';
import { InstructionsChoice } from './instructions.ts';

export const ApiIssue = z.object({ path: z.string(), message: z.string() });

export const ApiError = z
  .object({
    error: z.object({
      code: z.string(),
      message: z.string(),
      /** Every failing field as a dotted path, for 400s. */
      issues: z.array(ApiIssue).optional(),
    }),
  })
  .meta({ id: 'ApiError' });
export type ApiError = z.infer<typeof ApiError>;

export const Created = z.object({ id: Id }).meta({ id: 'Created' });
export type Created = z.infer<typeof Created>;

export const IdParam = z.object({ id: Id.meta({ param: { name: 'id', in: 'path' } }) });

// ---------------------------------------------------------------- runs

/**
 * requested → running → finished | stopped | failed; `stopping` once a stop was asked for and the
 * current iteration is still finishing.
 */
export const RunState = z.enum(['requested', 'running', 'stopping', 'stopped', 'finished', 'failed']);
export type RunState = z.infer<typeof RunState>;

export const RunStatus = z
  .object({
    run: RunId,
    state: RunState,
    requestedAt: z.iso.datetime(),
    startedAt: z.iso.datetime().nullable(),
    finishedAt: z.iso.datetime().nullable(),
    error: z.string().max(4000).nullable(),
    /** Why a stopped run stopped: asked to (stop.json, esopt runs stop) or at its budget, in a sentence. */
    stopReason: z.string().max(1000).nullable().optional(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'RunStatus' });
export type RunStatus = z.infer<typeof RunStatus>;

export const StopRequest = z.object({ run: RunId, requestedAt: z.iso.datetime() });
export type StopRequest = z.infer<typeof StopRequest>;

export const RunSummary = z
  .object({
    id: RunId,
    name: Id.nullable(),
    /** `unknown` for a run started outside the API (e.g. `esopt train`) that has no status object. */
    state: z.union([RunState, z.literal('unknown')]),
    environment: EnvironmentSpec.shape.name,
    /** Iterations whose metrics row is in the store. */
    completedIterations: z.number().int().min(0),
    iterations: z.number().int().min(1),
    /** The latest metrics row: the members' training success and reward of that iteration, not held-out success. */
    latest: MetricsRow.nullable(),
    /** The latest held-out evaluation (θ_iteration on the eval split): what the run is judged by. */
    heldOut: z
      .object({
        iteration: Iteration,
        tasks: z.number().int().min(0),
        successRate: z.number().min(0).max(1),
        interval: z.object({ low: z.number().min(0).max(1), high: z.number().min(0).max(1) }),
        failed: z.number().int().min(0),
        topError: TopError.nullable(),
      })
      .nullable(),
    requestedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'RunSummary' });
export type RunSummary = z.infer<typeof RunSummary>;

/** The query of a listing (GET /runs, GET /evaluations): ids in lexical order, `limit` of them after `after`. */
export const PageQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).default(100).describe('at most this many (1-500, default 100)'),
  after: Id.optional().describe("the previous page's `next`: this page starts after that id"),
});
export type PageQuery = z.infer<typeof PageQuery>;

/** Where the next page starts (`after=`), or null on the last page. */
const NextPage = z.string().nullable();

export const RunList = z.object({ runs: z.array(RunSummary), next: NextPage }).meta({ id: 'RunList' });
export type RunList = z.infer<typeof RunList>;

export const RunDetail = RunSummary.extend({
  config: RunConfig,
  status: RunStatus.nullable(),
  /** The iteration in flight (manifest written, no metrics row yet), if any. */
  current: z.object({ iteration: Iteration, expected: z.number().int().min(0), arrived: z.number().int().min(0) }).nullable(),
  stopRequested: z.boolean(),
}).meta({ id: 'RunDetail' });
export type RunDetail = z.infer<typeof RunDetail>;

export const MetricsSeries = z
  .object({ run: RunId, rows: z.array(MetricsRow), evaluations: z.array(EvaluationResult) })
  .meta({ id: 'MetricsSeries' });
export type MetricsSeries = z.infer<typeof MetricsSeries>;

export const CheckpointList = z.object({ run: RunId, checkpoints: z.array(CheckpointMeta) }).meta({ id: 'CheckpointList' });
export type CheckpointList = z.infer<typeof CheckpointList>;

/** The server-sent events of `GET /runs/{id}/events`; the SSE `event:` field is `type`. */
export const RunEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('status'), status: RunStatus.nullable(), stopRequested: z.boolean() }),
  z.object({ type: z.literal('iteration-started'), iteration: Iteration, expected: z.number().int().min(0) }),
  z.object({ type: z.literal('rewards'), iteration: Iteration, arrived: z.number().int().min(0), expected: z.number().int().min(0) }),
  z.object({ type: z.literal('update-applied'), iteration: Iteration, row: MetricsRow }),
  z.object({ type: z.literal('evaluation'), iteration: Iteration, result: EvaluationResult }),
  /** The run reached a final state; the stream closes after this event. */
  z.object({ type: z.literal('end'), state: RunState }),
]);
export type RunEvent = z.infer<typeof RunEvent>;

// ---------------------------------------------------------------- evaluations

/** What an external model's provider charges, so the budget covers their bill as well as ours. */
export const TokenPricing = z
  .object({
    usdPerMillionPromptTokens: z.number().min(0).finite().default(0),
    usdPerMillionCompletionTokens: z.number().min(0).finite().default(0),
  })
  .strict();

export const EvaluationModel = z.discriminatedUnion('kind', [
  /** Untrained weights of a model spec (θ_0), served by an inference server the API starts. */
  z.object({ kind: z.literal('base'), model: ModelSpec }).strict(),
  /** A run's checkpoint (its newest when `iteration` is left out). */
  z.object({ kind: z.literal('checkpoint'), run: RunId, iteration: Iteration.optional() }).strict(),
  /** Any OpenAI-compatible endpoint: an agent that is not ours. */
  z
    .object({
      kind: z.literal('external'),
      /** Up to the API version, e.g. https://api.example.com/v1. */
      baseUrl: z.url(),
      model: z.string().min(1).max(200),
      /** Sent as the bearer token, to this origin only; never in the bucket, a log or an answer (the deployed stack holds it in SSM while the evaluation waits and runs). */
      apiKey: z.string().min(1).max(4000).optional(),
      /** Forward environments' action constraints as `guided_regex` / `guided_choice` (vLLM-style servers only). */
      guidedDecoding: z.boolean().default(false),
      pricing: TokenPricing.default({ usdPerMillionPromptTokens: 0, usdPerMillionCompletionTokens: 0 }),
    })
    .strict(),
]);
export type EvaluationModel = z.infer<typeof EvaluationModel>;

export const EvaluationTaskSet = z.union([
  z.object({ split: z.enum(['train', 'eval']), count: z.number().int().min(1).max(10_000), seed: Seed.default(0) }).strict(),
  /**
   * `count` tasks of one split of a pushed task suite, drawn at `seed`; the suite is pinned to its manifest
   * when the evaluation is created, and a split with fewer tasks is refused (400 at `tasks.count`).
   */
  z.object({ suite: TaskSuiteChoice, split: z.enum(['train', 'eval', 'validation']).default('eval'), count: z.number().int().min(1).max(10_000), seed: Seed.default(0) }).strict(),
  /** Explicit tasks, each validated by the environment's task schema. */
  z.object({ tasks: z.array(z.object({ id: TaskId, task: z.unknown() }).strict()).min(1).max(10_000) }).strict(),
]);
export type EvaluationTaskSet = z.infer<typeof EvaluationTaskSet>;

export const EvaluationBudget = z
  .object({
    maxEpisodes: z.number().int().min(1).max(100_000).optional(),
    /** No episode starts once the spend so far plus the expected cost of the next would pass this. */
    maxCostUsd: z.number().positive().finite().optional(),
  })
  .strict();
export type EvaluationBudget = z.infer<typeof EvaluationBudget>;

export const EvaluationRequest = z
  .object({
    model: EvaluationModel,
    environment: EnvironmentSpec,
    tasks: EvaluationTaskSet,
    /** The instructions (c_t) every episode runs under (`esopt instructions push`), pinned at creation; absent: the environment's prompt. */
    instructions: InstructionsChoice.optional(),
    /** Episodes wanted; tasks are cycled when there are more episodes than tasks (each round reseeded). */
    episodes: z.number().int().min(1).max(100_000),
    budget: EvaluationBudget.default({}),
    /** Episodes run at once: also the size of a wave between budget checks. */
    concurrency: z.number().int().min(1).max(256).default(4),
    generation: GenerationOptions.default({ temperature: 0, topP: 1, topK: 0, maxTokens: 32 }),
    /** Per-episode time limit. */
    timeoutMs: z.number().int().min(1000).max(3_600_000).default(120_000),
    /** An episode with at least this reward counts as a success. */
    successThreshold: z.number().finite().default(1),
    seed: Seed.default(0),
  })
  .strict()
  .meta({ id: 'EvaluationRequest' });
export type EvaluationRequest = z.infer<typeof EvaluationRequest>;
export type EvaluationRequestInput = z.input<typeof EvaluationRequest>;

/** The request as stored and shown: the external model's key is dropped, `hasApiKey` says whether one was given. */
export const StoredEvaluationRequest = EvaluationRequest.extend({
  model: z.discriminatedUnion('kind', [
    EvaluationModel.options[0],
    EvaluationModel.options[1],
    EvaluationModel.options[2].omit({ apiKey: true }).extend({ hasApiKey: z.boolean() }),
  ]),
  createdAt: z.iso.datetime(),
});
export type StoredEvaluationRequest = z.infer<typeof StoredEvaluationRequest>;

export const EvaluationStopReason = z.enum(['completed', 'max-episodes', 'max-cost']);
export type EvaluationStopReason = z.infer<typeof EvaluationStopReason>;

export const EvaluationState = z.enum(['queued', 'running', 'finished', 'failed']);

export const EvaluationStatus = z
  .object({
    id: Id,
    state: EvaluationState,
    /** Set once it finished: all episodes ran, or which budget stopped it early. */
    stopReason: EvaluationStopReason.nullable(),
    planned: z.number().int().min(0),
    dispatched: z.number().int().min(0),
    waves: z.number().int().min(0),
    error: z.string().max(4000).nullable(),
    updatedAt: z.iso.datetime(),
    finishedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'EvaluationStatus' });
export type EvaluationStatus = z.infer<typeof EvaluationStatus>;

export const EvaluationEpisode = z
  .object({
    index: z.number().int().min(0),
    task: TaskId,
    /** How many times the task set had been gone through before this episode. */
    round: z.number().int().min(0),
    reward: z.number().finite(),
    success: z.boolean(),
    steps: z.number().int().min(0),
    tokens: z.object({ prompt: z.number().int().min(0), completion: z.number().int().min(0) }),
    durationMs: z.number().min(0),
    /** What this episode cost as an evaluation: see docs/API.md, "Evaluation pricing". */
    cost: Cost,
    error: z.string().nullable(),
    /** API path of the transcript, when the worker stored one. */
    transcript: z.string().nullable(),
  })
  .meta({ id: 'EvaluationEpisode' });
export type EvaluationEpisode = z.infer<typeof EvaluationEpisode>;

export const EvaluationSummary = z
  .object({
    episodes: z.number().int().min(0),
    successes: z.number().int().min(0),
    failed: z.number().int().min(0),
    /** The most common error of the failed episodes (messages differing only in numbers count as one). */
    topError: TopError.nullable(),
    successRate: z.number().min(0).max(1),
    /** 95% Wilson score interval of the success rate. */
    interval: z.object({ low: z.number().min(0).max(1), high: z.number().min(0).max(1) }),
    meanReward: z.number().finite().nullable(),
    totalCostUsd: z.number().min(0),
    meanCostUsdPerEpisode: z.number().min(0).nullable(),
    stopReason: EvaluationStopReason.nullable(),
    /** A sentence for people: what ran and why it stopped. */
    note: z.string(),
  })
  .meta({ id: 'EvaluationSummary' });
export type EvaluationSummary = z.infer<typeof EvaluationSummary>;

export const EvaluationView = z
  .object({
    id: Id,
    request: StoredEvaluationRequest,
    status: EvaluationStatus,
    episodes: z.array(EvaluationEpisode),
    summary: EvaluationSummary,
  })
  .meta({ id: 'EvaluationView' });
export type EvaluationView = z.infer<typeof EvaluationView>;

export const EvaluationList = z
  .object({ evaluations: z.array(z.object({ id: Id, status: EvaluationStatus, request: StoredEvaluationRequest, summary: EvaluationSummary })), next: NextPage })
  .meta({ id: 'EvaluationList' });
export type EvaluationList = z.infer<typeof EvaluationList>;

export const StopAccepted = z.object({ id: RunId, state: RunState, stopRequested: z.literal(true) }).meta({ id: 'StopAccepted' });
export type StopAccepted = z.infer<typeof StopAccepted>;

export const ResumeAccepted = z
  .object({
    id: RunId,
    state: RunState,
    /** Updates the run's log has committed: it goes on from θ after these. */
    completedIterations: z.number().int().min(0),
    iterations: z.number().int().min(1),
    budget: RunConfig.shape.budget.unwrap(),
    /** What the request changed in the stored config, one `field before → after` a change. */
    changes: z.array(z.string()),
  })
  .meta({ id: 'ResumeAccepted' });
export type ResumeAccepted = z.infer<typeof ResumeAccepted>;
