import { z } from 'zod';
import { MemberRoutes } from './replicas.ts';
import { Iteration, MemberIndex, RunId, Seed, TaskId } from './ids.ts';
import { Targets } from '../targets.ts';
import { DeviceNoiseName } from '../noise-definition.ts';
import { LoraOptions } from '../lora.ts';
import { TaskSuiteName } from './task-suite-ref.ts';
import { Sha256 } from './model-store.ts';
import { PinnedInstructions } from './instructions.ts';

/** One population member: its noise is regenerated from (runSeed, iteration, noiseIndex), times sign. */
export const Member = z.object({
  index: MemberIndex,
  noiseIndex: MemberIndex,
  sign: z.union([z.literal(1), z.literal(-1)]),
});
export type Member = z.infer<typeof Member>;

export const TaskRef = z.object({ id: TaskId, task: z.unknown() });
export type TaskRef = z.infer<typeof TaskRef>;

export const IterationManifest = z.object({
  run: RunId,
  iteration: Iteration,
  runSeed: Seed,
  /** Hash of θ_k, so a worker or auditor can tell which weights the members perturb. */
  thetaHash: z.string().regex(/^[0-9a-f]{16,64}$/),
  sigma: z.number().positive(),
  mode: z.enum(['full', 'lowrank', 'lora']),
  rank: z.number().int().min(1),
  /** The tensors the members perturb (shared/targets.ts); absent: all of them. */
  targets: Targets.optional(),
  /** The run's noise definition (shared/noise-definition.ts); absent: 'esopt-noise'. */
  noise: DeviceNoiseName.optional(),
  /** LoRA mode: the adapters θ is (rank, alpha, the matrices they attach to); members perturb all of them. */
  lora: LoraOptions.optional(),
  members: z.array(Member).min(1),
  tasks: z.array(TaskRef).min(1),
  /** The task suite the tasks were drawn from, pinned to its manifest (absent: the environment's generator). */
  suite: z.object({ name: TaskSuiteName, manifest: Sha256 }).strict().optional(),
  /** The instructions (c_t) the episodes ran under, pinned (absent: the environment's own prompt). */
  instructions: PinnedInstructions.optional(),
  episodesPerMember: z.number().int().min(1),
  quorum: z.number().gt(0).max(1),
  deadline: z.iso.datetime(),
  createdAt: z.iso.datetime(),
  /** With trainer replicas: which replica serves each member (absent: the coordinator serves all). */
  routing: MemberRoutes.optional(),
});
export type IterationManifest = z.infer<typeof IterationManifest>;

/** Written after an update: exactly which records counted, so the update can be audited and replayed. */
export const UpdateRecord = z.object({
  run: RunId,
  iteration: Iteration,
  counted: z.array(z.object({ member: MemberIndex, task: TaskId })),
  memberRewards: z.array(z.object({ member: MemberIndex, reward: z.number().finite() })),
  normalizedRewards: z.array(z.object({ member: MemberIndex, value: z.number().finite() })),
  thetaHashBefore: z.string(),
  thetaHashAfter: z.string(),
  ignored: z.object({ duplicates: z.number().int().min(0), failed: z.number().int().min(0), invalid: z.number().int().min(0) }),
  /** The failed episodes that were left out of the update (or given `failedEpisodeReward`), with their errors. */
  failures: z.array(z.object({ member: MemberIndex, task: TaskId, error: z.string() })).default([]),
  /** Keys under the rewards prefix that were not a usable record, and why. */
  invalidRecords: z.array(z.object({ key: z.string(), reason: z.string() })).default([]),
});
export type UpdateRecord = z.infer<typeof UpdateRecord>;
