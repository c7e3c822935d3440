/**
 * `rollout`: the user's agent, in any framework, is the episode. esopt posts the task, a seed and an
 * inference grant (the member's OpenAI-compatible endpoint, model and a key of the rollout's own) to the
 * agent's rollout endpoint — or, in embedded runs, hands it to a local command on stdin — and the agent
 * answers one scalar reward. ES needs nothing more from an episode (play.ts runs it; the Episode function
 * issues the key and refuses a reward whose key was never used).
 *
 * There is no reset/step: `create` refuses, and so do the scripted policies, since the agent plays itself.
 * Tasks are any JSON object (from a task suite), or `{ seed }` tasks sampled here for agents that make their
 * own problem from a seed.
 */
import { z } from 'zod';
import type { EnvironmentDefinition } from '../environment.ts';
import { sampleSplit } from '../task-sampler.ts';

/** The most a task may weigh as JSON: it travels in every episode event and every rollout request. */
export const MAX_ROLLOUT_TASK_BYTES = 64 * 1024;

export const RolloutTask = z
  .record(z.string(), z.unknown())
  .refine((task) => Buffer.byteLength(JSON.stringify(task)) <= MAX_ROLLOUT_TASK_BYTES, { message: `a rollout task is at most ${MAX_ROLLOUT_TASK_BYTES} bytes of JSON` });
export type RolloutTask = z.infer<typeof RolloutTask>;

export const RolloutOptions = z
  .object({
    /** The agent's rollout endpoint: https (http only to this machine in embedded runs). */
    url: z.url().optional(),
    /** Embedded runs only, from a run config file: a program given the request on stdin, answering on stdout. */
    command: z.array(z.string().min(1).max(4096)).min(1).max(64).optional(),
    /** The most one rollout may take (the episode's deadline, if sooner, wins). */
    timeoutMs: z.number().int().min(1_000).max(3_600_000).default(300_000),
    /** The most the agent's answer may weigh. */
    maxResponseBytes: z.number().int().min(256).max(1_048_576).default(65_536),
  })
  .strict()
  .refine((o) => (o.url === undefined) !== (o.command === undefined), { message: 'give exactly one of url (an endpoint) or command (a local program, embedded runs only)' });
export type RolloutOptions = z.infer<typeof RolloutOptions>;

const PLAYED_BY_AGENT = 'a rollout episode is played by your agent, not stepped here: there is no reset/step and no scripted policy (oracle, random)';

export const rollout: EnvironmentDefinition<RolloutTask, RolloutOptions> = {
  name: 'rollout',
  taskSchema: RolloutTask,
  optionsSchema: RolloutOptions,
  async create() {
    throw new Error(PLAYED_BY_AGENT);
  },
  sampleTasks(split, n, seed) {
    return sampleSplit({ idPrefix: 'rollout', generate: (random) => ({ seed: random.int(2 ** 31) }) }, split, n, seed);
  },
  oracle() {
    throw new Error(PLAYED_BY_AGENT);
  },
  random() {
    throw new Error(PLAYED_BY_AGENT);
  },
};
