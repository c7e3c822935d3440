import { z } from 'zod';
import { SecretName } from './evaluation-key.ts';
import { Iteration, MemberIndex, RunId, Seed, TaskId } from './ids.ts';
import { EnvironmentSpec, GenerationOptions } from './run-config.ts';
import { EpisodeInstructions } from './instructions.ts';

/** Where the policy lives: an OpenAI-compatible endpoint (our trainer, or anybody's). */
export const PolicyEndpoint = z.object({
  baseUrl: z.url(),
  model: z.string().min(1).max(200),
  /** Name of the environment variable holding the bearer token; the token itself never travels in events. */
  tokenEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/).optional(),
  /**
   * Instead of `tokenEnv`: the secret (an SSM parameter) that holds a queued evaluation's endpoint key,
   * bound to the one origin it may be sent to (shared/secrets/evaluation-key.ts).
   */
  tokenParameter: SecretName.optional(),
  /**
   * Send the environment's action constraint as vLLM's `guided_regex` / `guided_choice` (the trainer's
   * server and vLLM honour it); set false for endpoints that reject fields they do not know. Default on.
   */
  guidedDecoding: z.boolean().optional(),
  /**
   * Other servers holding the same weights (trainer replicas), tried in order when `baseUrl` does not
   * answer or answers 5xx; any replica can serve any member, since a member is only a seed.
   */
  fallbackUrls: z.array(z.url()).max(16).optional(),
});
export type PolicyEndpoint = z.infer<typeof PolicyEndpoint>;

/** Who is playing: a population member of an iteration, or the base (unperturbed) weights. */
export const MemberRef = z.union([MemberIndex, z.literal('base')]);
export type MemberRef = z.infer<typeof MemberRef>;

export const EpisodeRequest = z.object({
  run: RunId,
  iteration: Iteration,
  member: MemberRef,
  task: z.object({ id: TaskId, value: z.unknown() }),
  environment: EnvironmentSpec,
  policy: PolicyEndpoint,
  generation: GenerationOptions,
  /** Seeds the environment and the sampling of this episode so it can be replayed exactly. */
  seed: Seed,
  /** Absolute deadline; an episode still running then is abandoned and recorded as an error. */
  deadline: z.iso.datetime(),
  /**
   * The instructions (c_t) the episode runs under, documents included (≤ INSTRUCTIONS_LIMITS.totalBytes), so
   * the Episode function reads nothing more; absent: the environment's own system prompt.
   */
  instructions: EpisodeInstructions.optional(),
});
export type EpisodeRequest = z.infer<typeof EpisodeRequest>;

export const Cost = z.object({
  usd: z.number().min(0).finite(),
  lambdaGbSeconds: z.number().min(0).finite(),
  gpuSeconds: z.number().min(0).finite(),
});
export type Cost = z.infer<typeof Cost>;

export const RewardRecord = z.object({
  run: RunId,
  iteration: Iteration,
  member: MemberRef,
  task: TaskId,
  /** Finite by construction: NaN or ±Infinity is rejected, never folded into an update. */
  reward: z.number().finite(),
  steps: z.number().int().min(0),
  tokens: z.object({ prompt: z.number().int().min(0), completion: z.number().int().min(0) }),
  durations: z.object({ episodeMs: z.number().min(0), inferenceMs: z.number().min(0) }),
  cost: Cost,
  /** Null for a finished episode; the reason when it failed (excluded from the update). */
  error: z.string().max(2000).nullable(),
  transcriptKey: z.string().max(512).nullable().default(null),
  writtenAt: z.iso.datetime(),
});
export type RewardRecord = z.infer<typeof RewardRecord>;
