import { z } from 'zod';
import { Iteration, RunId } from './ids.ts';
import { Targets } from '../targets.ts';
import { DeviceNoiseName } from '../noise-definition.ts';
import { PinnedInstructions } from './instructions.ts';

export const CheckpointMeta = z.object({
  run: RunId,
  iteration: Iteration,
  params: z.number().int().min(0),
  /** Hash of the float32 bytes of θ; a torn or corrupt weight file fails this check. */
  thetaHash: z.string(),
  bytes: z.number().int().min(0),
  weightsKey: z.string(),
  createdAt: z.iso.datetime(),
});
export type CheckpointMeta = z.infer<typeof CheckpointMeta>;

/** One line of runs/{run}/log.jsonl: enough to replay θ_k from the last full checkpoint. */
export const LogEntry = z.object({
  iteration: Iteration,
  runSeed: z.number().int().min(0),
  sigma: z.number().positive(),
  alpha: z.number().positive(),
  weightDecay: z.number().min(0),
  members: z.array(z.object({ noiseIndex: z.number().int().min(0), sign: z.union([z.literal(1), z.literal(-1)]) })),
  normalizedRewards: z.array(z.number().finite()),
  /** The tensors the update touches (shared/targets.ts); absent: all of them. */
  targets: Targets.optional(),
  /** The noise definition the update's ε comes from (shared/noise-definition.ts); absent: 'esopt-noise'. */
  noise: DeviceNoiseName.optional(),
  /** The instructions (c_t) the update's episodes ran under; absent: the environment's own prompt. */
  instructions: PinnedInstructions.optional(),
  thetaHashAfter: z.string(),
});
export type LogEntry = z.infer<typeof LogEntry>;
