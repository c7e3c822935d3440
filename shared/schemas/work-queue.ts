/**
 * Work the stateless API leaves in the store for the trainer box (docs/CLOUD.md, "The trainer box"):
 * one QueuedWork per run, evaluation or model export to start, and the WorkClaim with which exactly one box takes it.
 * A stop needs no queue entry: the run's stop.json is the request, and the box running it watches for it.
 */
import { z } from 'zod';
import { EvaluationKeyRef } from './evaluation-key.ts';
import { Id } from './ids.ts';
import { ModelExportRequest } from './model-export.ts';

export const WorkKind = z.enum(['run', 'evaluation', 'export']);
export type WorkKind = z.infer<typeof WorkKind>;

export const QueuedWork = z
  .object({
    kind: WorkKind,
    /** The run id or the evaluation id; its config / request is in the store already. */
    id: Id,
    queuedAt: z.iso.datetime(),
    /** An evaluation of a keyed endpoint: where the key is (the secret store) and the origin it is for; never the key. */
    apiKey: EvaluationKeyRef.optional(),
    /** A model export: which θ_k, in which format (its status.json is in the store already). */
    export: ModelExportRequest.optional(),
  })
  .strict();
export type QueuedWork = z.infer<typeof QueuedWork>;

export const WorkClaim = z
  .object({
    kind: WorkKind,
    id: Id,
    /** Random per claim attempt: read back to tell whose write survived on servers without If-None-Match. */
    claimId: z.string().regex(/^[0-9a-f]{32}$/),
    /** Which box took it (hostname and process), for people reading the bucket. */
    claimedBy: z.string().min(1).max(200),
    claimedAt: z.iso.datetime(),
    /** Rewritten by the claimant every CLAIM_HEARTBEAT_MS while the work runs (shared/stale-claim.ts). */
    heartbeatAt: z.iso.datetime().optional(),
  })
  .strict();
export type WorkClaim = z.infer<typeof WorkClaim>;
