import { z } from 'zod';
import { Id, Seed } from './ids.ts';
import { SecretName } from './evaluation-key.ts';
import { ModelName, Sha256 } from './model-store.ts';
import { Schedule } from '../schedule.ts';
import { LoraOptions } from '../lora.ts';
import { Targets, targetsAll } from '../targets.ts';
import { NoiseDefinitionName } from '../noise-definition.ts';
import { TaskSuiteChoice } from './task-suite-ref.ts';
import { InstructionsChoice } from './instructions.ts';

/** The built-in domains, and the kinds that reach outside: `openenv` (an OpenEnv HTTP server) and `rollout` (the user's agent). */
export const EnvironmentName = z.enum(['sudoku', 'tools', 'web', 'heuristic', 'openenv', 'rollout']);
export type EnvironmentName = z.infer<typeof EnvironmentName>;

/** Which environment, with its own options (validated by that environment's schema). */
export const EnvironmentSpec = z.object({
  name: EnvironmentName,
  options: z.record(z.string(), z.unknown()).default({}),
  /**
   * Embedded runs: the environment variable holding the key for the endpoint the options name (an OpenEnv
   * server, a rollout agent, an MCP server), sent as a bearer token to that endpoint's origin only. Never one
   * of esopt's own (ESOPT_*) or the cloud's (AWS_*): those hold the trainer's secrets.
   */
  keyEnv: z
    .string()
    .regex(/^[A-Z_][A-Z0-9_]*$/, { message: 'an environment variable name (A-Z, 0-9, _)' })
    .refine((name) => !/^(ESOPT_|AWS_)/.test(name), { message: "may not name esopt's own (ESOPT_*) or the cloud's (AWS_*) variables" })
    .optional(),
  /**
   * A deployed stack: the secret holding that key, bound to the endpoint's origin. Set by the API from the
   * request's `X-Esopt-Environment-Key` header (functions/http-api/environment-key.ts), never by a request.
   */
  keyParameter: SecretName.optional(),
});
export type EnvironmentSpec = z.infer<typeof EnvironmentSpec>;

export const PresetModelSpec = z.object({ preset: z.enum(['tiny', 'small', 'qwen3-0.6b-shape']), seed: Seed.default(0) });
export const DirModelSpec = z.object({ dir: z.string().min(1) });
/**
 * A model pushed to the store (`esopt models push`), by name; `manifest` pins the manifest's sha256, which
 * the API and the CLI fill in when a run or evaluation is created, so a re-push never changes its θ₀.
 */
export const NamedModelSpec = z.object({ name: ModelName, manifest: Sha256.optional() }).strict();

export const ModelSpec = z.union([PresetModelSpec, DirModelSpec, NamedModelSpec]);
export type ModelSpec = z.infer<typeof ModelSpec>;
/** What the loader opens: a preset or a directory on this machine (a named model resolved to its cached directory). */
export type LocalModelSpec = z.infer<typeof PresetModelSpec> | z.infer<typeof DirModelSpec>;
export type NamedModelSpec = z.infer<typeof NamedModelSpec>;

export const Shaping = z.enum(['zscore', 'centered-rank', 'none']);
export type Shaping = z.infer<typeof Shaping>;

/**
 * Every member plays each of the iteration's `tasks.trainPerIteration` tasks, its rewards averaged before
 * shaping: that count is the episodes per member, so `es.episodesPerMember` is refused. Its old default
 * (1), which the stored configs of earlier runs carry, still parses and is dropped, so they resume.
 */
const RemovedEpisodesPerMember = z
  .literal(1, { error: 'es.episodesPerMember was removed: every member plays each of the iteration\'s tasks, so set tasks.trainPerIteration to the episodes per member' })
  .optional();

/** Hyper-parameters of the ES update itself: everything `shared/es.ts` needs, nothing more. */
export const EsOptions = z
  .object({
    population: z.number().int().min(2).max(100_000),
    /** σ: a number, or a schedule over the iterations (shared/schedule.ts). */
    sigma: Schedule,
    /** α, the whole step: a number, or a schedule. */
    alpha: Schedule,
    antithetic: z.boolean().default(true),
    shaping: Shaping.default('zscore'),
    weightDecay: z.number().min(0).finite().default(0),
    episodesPerMember: RemovedEpisodesPerMember,
  })
  .transform(({ episodesPerMember: _, ...es }) => es);
export type EsOptions = z.infer<typeof EsOptions>;

export const GenerationOptions = z.object({
  temperature: z.number().min(0).max(5).default(0),
  topP: z.number().gt(0).max(1).default(1),
  topK: z.number().int().min(0).default(0),
  maxTokens: z.number().int().min(1).max(32_768).default(32),
});
export type GenerationOptions = z.infer<typeof GenerationOptions>;

/**
 * Full mode's weights: θ fed as graph inputs (`inputs`: training memory = inference memory, slower
 * decoding), or a prepacked session built per member (`rebuild-session`: decoding at full speed, a session
 * build per member switch and a prepacked copy of θ beside it). docs/MODEL.md compares them.
 */
export const FullModeWeights = z.enum(['inputs', 'rebuild-session']);
export type FullModeWeights = z.infer<typeof FullModeWeights>;

/**
 * The most episodes one run may play, training and evaluation together: population × trainPerIteration ×
 * iterations, plus evalCount × the evaluations (one before iteration 0, one before every evalInterval-th
 * iteration, one after the last). The fields' own maxima multiply out to 10¹⁵ episodes, a bill no person
 * means to ask for and one request should not be able to; 10 million bounds what a single run can spend at the
 * stack's prices (docs/CLOUD.md, "Cost per 1,000 episodes"). Checked at creation and again at every resume, so
 * an extended run stays under it too.
 */
export const MAX_RUN_EPISODES = 10_000_000;

/** The episodes a run plays when it runs all its iterations: its training episodes and its evaluations'. */
export function runEpisodes(c: { es: { population: number }; tasks: { trainPerIteration: number; evalCount: number }; iterations: number; evalInterval: number }): { train: number; evaluation: number } {
  return {
    train: c.es.population * c.tasks.trainPerIteration * c.iterations,
    evaluation: c.tasks.evalCount * (Math.ceil(c.iterations / c.evalInterval) + 1),
  };
}

export const RunConfig = z
  .object({
    name: Id.optional(),
    environment: EnvironmentSpec,
    tasks: z
      .object({
        seed: Seed.default(0),
        trainPerIteration: z.number().int().min(1).max(10_000).default(1),
        evalCount: z.number().int().min(1).max(100_000).default(32),
        /** What evaluations run on: the eval split, or validation tasks for choosing settings without touching eval. */
        evalSplit: z.enum(['eval', 'validation']).default('eval'),
        /**
         * A pushed task suite (`esopt tasks push`) instead of the environment's generator: each iteration's
         * trainPerIteration tasks are drawn from its train split at the iteration's seed, evaluations' evalCount
         * from its evalSplit. Pinned to its manifest when the run is created, so a re-push never changes the run.
         */
        suite: TaskSuiteChoice.optional(),
      })
      .default({ seed: 0, trainPerIteration: 1, evalCount: 32, evalSplit: 'eval' }),
    model: ModelSpec,
    /**
     * The instructions (c_t) every episode runs under, pushed with `esopt instructions push`: a name, pinned to
     * its manifest when the run is created. Absent: each environment's own system prompt.
     */
    instructions: InstructionsChoice.optional(),
    /** full: every weight of θ; lowrank: EGGROLL's low-rank noise over W; lora: θ is LoRA adapters (`lora`), W frozen. */
    mode: z.enum(['full', 'lowrank', 'lora']).default('full'),
    /** LoRA-ES (shared/lora.ts): rank, alpha and the matrices the adapters attach to; required iff mode is lora. */
    lora: LoraOptions.optional(),
    fullModeWeights: FullModeWeights.default('inputs'),
    rank: z.number().int().min(1).max(64).default(1),
    /**
     * Which tensors ES perturbs and updates (shared/targets.ts): `all` (default), `all-linear`, or
     * `{ include, exclude }` name patterns; resolved against the model at run start.
     */
    targets: Targets.default('all'),
    /**
     * The noise definition of the run's members and updates (shared/noise-definition.ts): 'esopt-noise'
     * (absent: the default) or 'esopt-device-noise', which full mode on webgpu makes on the device (docs/MODEL.md).
     */
    noise: NoiseDefinitionName.optional(),
    es: EsOptions,
    generation: GenerationOptions.default({ temperature: 0, topP: 1, topK: 0, maxTokens: 32 }),
    /** Fraction of episode records needed before the deadline may close collection. */
    quorum: z.number().gt(0).max(1).default(1),
    /** Milliseconds after the manifest is published before collection may close with a quorum. */
    deadlineMs: z.number().int().min(1).max(86_400_000).default(600_000),
    iterations: z.number().int().min(1).max(1_000_000),
    evalInterval: z.number().int().min(1).default(10),
    checkpointInterval: z.number().int().min(1).default(10),
    /**
     * Checkpoints kept: after each one the trainer deletes all but the newest this many (θ at any iteration is
     * still exact: the newest checkpoint at or before it, or θ_0, replayed through the log).
     */
    checkpointKeep: z.number().int().min(1).max(10_000).default(3),
    /**
     * Spending limits: no iteration starts once the spend so far plus the last iteration's would pass one of
     * them; the run stops cleanly (a checkpoint of θ so far, status stopped with reason budget) and resumes
     * with a larger budget.
     */
    budget: z
      .object({
        maxCostUsd: z.number().positive().finite().optional(),
        maxEpisodes: z.number().int().min(1).optional(),
        maxHours: z.number().positive().finite().optional(),
      })
      .strict()
      .default({}),
    /** Failed episodes are excluded from the update unless given a reward here. */
    failedEpisodeReward: z.number().finite().nullable().default(null),
    /** An episode with at least this reward counts as a success (train success rate and evaluation). */
    successThreshold: z.number().finite().default(1),
    /**
     * Who plays the episodes: the model being trained (default), or the environment's scripted policy,
     * whose rewards do not depend on θ — for CPU-only simulations and for exact-resume tests.
     */
    policy: z.enum(['model', 'scripted:random', 'scripted:oracle']).default('model'),
    /** Episodes run at once by the embedded worker pool. */
    workers: z.number().int().min(1).max(1024).default(8),
    /**
     * Embedded runs only: where episodes play. `worker-processes` (default): child processes running the
     * Episode function against the inference server, each killable. `in-process`: in the trainer, on its
     * engine directly, every turn in flight in one batch — faster on one machine, no isolation, no chat
     * tools (trainer/fanout/in-process.ts).
     */
    localEpisodes: z.enum(['worker-processes', 'in-process']).default('worker-processes'),
    seed: Seed.default(0),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.mode === 'lora' && !c.lora) ctx.addIssue({ code: 'custom', path: ['lora'], message: 'is required when mode is "lora": { rank, alpha, targets }' });
    if (c.mode !== 'lora' && c.lora) ctx.addIssue({ code: 'custom', path: ['lora'], message: `is only for mode "lora" (this run's mode is "${c.mode}")` });
    // in lora mode θ is the adapters: lora.targets chooses the matrices they attach to
    if (c.noise === 'esopt-device-noise' && c.mode !== 'full') ctx.addIssue({ code: 'custom', path: ['noise'], message: `"esopt-device-noise" is for mode "full" (this run's mode is "${c.mode}"): low-rank and LoRA members draw their factors from "esopt-noise"` });
    // a rollout agent writes its own prompts: instructions would reach no model
    if (c.environment.name === 'rollout' && c.instructions) ctx.addIssue({ code: 'custom', path: ['instructions'], message: 'a rollout agent writes its own prompts, so instructions would reach no model: leave them out (give your agent its instructions itself)' });
    if (c.environment.name === 'rollout' && c.localEpisodes === 'in-process') ctx.addIssue({ code: 'custom', path: ['localEpisodes'], message: 'a rollout agent calls the inference server over HTTP: use "worker-processes"' });
    if (c.mode === 'lora' && !targetsAll(c.targets)) ctx.addIssue({ code: 'custom', path: ['targets'], message: 'is for full and low-rank mode; in lora mode set lora.targets (the matrices the adapters attach to)' });
    // σ = 0 perturbs nothing: a decaying σ needs a floor above 0
    const sigma = c.es.sigma;
    if (typeof sigma !== 'number' && (sigma.schedule === 'linear' || sigma.schedule === 'cosine') && sigma.final <= 0) {
      ctx.addIssue({ code: 'custom', path: ['es', 'sigma', 'final'], message: 'σ must stay above 0: give the schedule a final value (its floor) > 0' });
    }
    const episodes = runEpisodes(c);
    if (episodes.train + episodes.evaluation > MAX_RUN_EPISODES) {
      ctx.addIssue({
        code: 'custom',
        path: ['iterations'],
        message: `the run would play ${(episodes.train + episodes.evaluation).toLocaleString('en-US')} episodes (population ${c.es.population} × trainPerIteration ${c.tasks.trainPerIteration} × iterations ${c.iterations} = ${episodes.train.toLocaleString('en-US')}, plus ${episodes.evaluation.toLocaleString('en-US')} evaluation episodes), above the limit of ${MAX_RUN_EPISODES.toLocaleString('en-US')} a run (MAX_RUN_EPISODES): fewer iterations, a smaller population or fewer tasks per iteration`,
      });
    }
  });
export type RunConfig = z.infer<typeof RunConfig>;
export type RunConfigInput = z.input<typeof RunConfig>;
