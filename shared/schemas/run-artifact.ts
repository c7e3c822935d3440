import { z } from 'zod';
import { Iteration, MemberIndex, RunId, Seed } from './ids.ts';
import { ModelSpec } from './run-config.ts';
import { PinnedInstructions } from './instructions.ts';
import { TaskSuiteName } from './task-suite-ref.ts';
import { Sha256 } from './model-store.ts';

/**
 * A run as a portable artifact (docs/REPLAY.md): θ_K = θ_0 + the updates regenerated from their seeds, so
 * θ_0's hash, θ's layout in the noise stream, the noise definition and every update's coefficients are
 * all another framework needs to rebuild θ_K bit for bit.
 */
/** Version 2 added each tensor's `updated` (a run's targets); version 1 described only runs that update every tensor. */
export const RUN_ARTIFACT_FORMAT = 'esopt-run/2';

const ThetaHash = z.string().regex(/^[0-9a-f]{32}$/, 'must be 32 lowercase hex digits (shared/theta-hash.ts)');

/** One tensor of θ: where its elements sit in θ's flat fp32 file and in each member's ε stream. */
export const ArtifactTensor = z.object({
  name: z.string().min(1),
  dims: z.array(z.number().int().min(0)),
  /** Its first element's index in each member's ε stream (and in θ's flat file: tensors lie back to back). */
  offset: z.number().int().min(0),
  count: z.number().int().min(0),
  /**
   * Whether the updates (decay included) touch it: the run's targets select it among the tensors its mode
   * perturbs. Its place in θ and in the stream does not depend on this.
   */
  updated: z.boolean(),
});
export type ArtifactTensor = z.infer<typeof ArtifactTensor>;

/** Low-rank mode: a perturbed matrix W (m×n as it multiplies) and where its factors start in the stream. */
export const ArtifactLowRankTarget = z.object({
  /** Index into `layout.tensors`. */
  tensor: z.number().int().min(0),
  name: z.string().min(1),
  m: z.number().int().min(1),
  n: z.number().int().min(1),
  /** Stored [n, m] (a tied head reading the embedding table) rather than [m, n]. */
  transposed: z.boolean(),
  /** A = ε[offset, offset+m·r), B = ε[offset+m·r, offset+(m+n)·r). */
  offset: z.number().int().min(0),
});
export type ArtifactLowRankTarget = z.infer<typeof ArtifactLowRankTarget>;

export const ArtifactCoefficient = z.object({
  /** NoiseKey.member of the ε this coefficient scales. */
  noiseIndex: MemberIndex,
  /** (α/G)·Σ sign_i·R̂_i over the members with this noise index: the sign is already folded in. */
  coef: z.number().finite(),
});

export const ArtifactUpdate = z.object({
  iteration: Iteration,
  runSeed: Seed,
  alpha: z.number().positive(),
  weightDecay: z.number().min(0),
  /** α·λ, as the update multiplies θ by 1 − decay. */
  decay: z.number().min(0).finite(),
  /** The counted members in index order, with their shaped rewards: what `coefficients` is computed from. */
  members: z.array(z.object({ noiseIndex: MemberIndex, sign: z.union([z.literal(1), z.literal(-1)]), normalizedReward: z.number().finite() })),
  /** In ascending noise index, zero coefficients dropped: `coefficientsOf(entry)` (trainer/training/loop/weight-update.ts). */
  coefficients: z.array(ArtifactCoefficient),
  thetaHashAfter: ThetaHash,
});
export type ArtifactUpdate = z.infer<typeof ArtifactUpdate>;

export const RunArtifact = z
  .object({
    format: z.literal(RUN_ARTIFACT_FORMAT),
    run: RunId,
    model: ModelSpec,
    /** θ_0's hash: the iteration-0 manifest's thetaHash. */
    theta0Hash: ThetaHash,
    mode: z.enum(['full', 'lowrank']),
    rank: z.number().int().min(1),
    noise: z.object({ id: z.string().min(1), version: z.number().int().min(1) }),
    layout: z.object({ params: z.number().int().min(0), tensors: z.array(ArtifactTensor) }),
    /** What the run trained on and under, pinned (provenance: θ_K does not depend on them): its task suite, if any. */
    suite: z.object({ name: TaskSuiteName, manifest: Sha256 }).strict().optional(),
    /** The instructions (c_t) its episodes ran under, if any. */
    instructions: PinnedInstructions.optional(),
    /** Low-rank mode only: the perturbed matrices in stream order. */
    lowRankTargets: z.array(ArtifactLowRankTarget).optional(),
    updates: z.array(ArtifactUpdate),
  })
  .superRefine((a, ctx) => {
    let offset = 0;
    a.layout.tensors.forEach((t, i) => {
      const count = t.dims.reduce((p, d) => p * d, 1);
      if (t.count !== count) ctx.addIssue({ code: 'custom', path: ['layout', 'tensors', i, 'count'], message: `is ${t.count}, but dims ${JSON.stringify(t.dims)} hold ${count}` });
      if (t.offset !== offset) ctx.addIssue({ code: 'custom', path: ['layout', 'tensors', i, 'offset'], message: `is ${t.offset}, expected ${offset}: tensors lie back to back in canonical order` });
      offset += t.count;
    });
    if (a.layout.params !== offset) ctx.addIssue({ code: 'custom', path: ['layout', 'params'], message: `is ${a.layout.params}, the tensors hold ${offset}` });
    if ((a.mode === 'lowrank') !== (a.lowRankTargets !== undefined)) {
      ctx.addIssue({ code: 'custom', path: ['lowRankTargets'], message: a.mode === 'lowrank' ? 'is required in low-rank mode' : 'is only for low-rank mode' });
    }
    let factorOffset = 0;
    a.lowRankTargets?.forEach((t, i) => {
      if (t.offset !== factorOffset) ctx.addIssue({ code: 'custom', path: ['lowRankTargets', i, 'offset'], message: `is ${t.offset}, expected ${factorOffset}: each target's factors take (m+n)·rank of the stream, in order` });
      factorOffset += (t.m + t.n) * a.rank;
      const tensor = a.layout.tensors[t.tensor];
      if (!tensor) ctx.addIssue({ code: 'custom', path: ['lowRankTargets', i, 'tensor'], message: `${t.tensor} is not a tensor of the layout` });
      else if (tensor.count !== t.m * t.n) ctx.addIssue({ code: 'custom', path: ['lowRankTargets', i], message: `${t.m}×${t.n} does not fit tensor ${tensor.name} of ${tensor.count} elements` });
    });
    a.updates.forEach((u, k) => {
      if (u.iteration !== k) ctx.addIssue({ code: 'custom', path: ['updates', k, 'iteration'], message: `is ${u.iteration}, expected ${k}: updates run from iteration 0 without gaps` });
      u.coefficients.forEach((c, j) => {
        if (j > 0 && c.noiseIndex <= u.coefficients[j - 1].noiseIndex) ctx.addIssue({ code: 'custom', path: ['updates', k, 'coefficients', j, 'noiseIndex'], message: 'coefficients must be in strictly ascending noise index' });
      });
    });
  });
export type RunArtifact = z.infer<typeof RunArtifact>;
