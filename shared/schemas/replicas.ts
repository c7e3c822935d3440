/**
 * Trainer replicas: every replica holds θ, serves the members routed to it, and applies the same logged
 * update from seeds and coefficients, so only these small records cross the store (no weights move).
 */
import { z } from 'zod';
import { Id, Iteration, MemberIndex } from './ids.ts';
import { CertificateFingerprint } from './trainer-certificate.ts';

export const ReplicaId = Id.describe('replica id');

/** Where a replica serves; written by the replica when it has caught up, read by the coordinator. */
export const ReplicaAnnouncement = z.object({
  id: ReplicaId,
  /** The OpenAI-compatible base URL, ending in /v1. */
  baseUrl: z.url(),
  /**
   * An https replica's certificate (public PEM and its SHA-256, never a key), made at its start: the Episode
   * function pins exactly this certificate for this baseUrl's origin, and sends the token nowhere else.
   */
  tls: z.object({ certificate: z.string().startsWith('-----BEGIN CERTIFICATE-----'), sha256: CertificateFingerprint }).optional(),
  startedAt: z.iso.datetime(),
});
export type ReplicaAnnouncement = z.infer<typeof ReplicaAnnouncement>;

/** "My θ before iteration `iteration` (that many updates applied) hashes to `thetaHash`"; create-only per (iteration, replica). */
export const ReplicaReport = z.object({
  id: ReplicaId,
  iteration: Iteration,
  thetaHash: z.string().regex(/^[0-9a-f]{16,64}$/),
  reportedAt: z.iso.datetime(),
});
export type ReplicaReport = z.infer<typeof ReplicaReport>;

/** Which replica serves each member of an iteration; the coordinator's own server is a replica too. */
export const MemberRoutes = z.object({
  replicas: z.array(z.object({ id: ReplicaId, baseUrl: z.url() })).min(1),
  /** `routes[i]` is the index into `replicas` of the replica serving member i (by member index). */
  routes: z.array(z.object({ member: MemberIndex, replica: z.number().int().min(0) })),
});
export type MemberRoutes = z.infer<typeof MemberRoutes>;

/**
 * The run the coordinator box is training now (`keys.activeRun()`, overwritten per run it starts): what the
 * stack's replica boxes follow. `startedAt` tells a resumed run from the earlier start the replicas followed.
 */
export const ActiveRun = z.object({
  run: Id,
  startedAt: z.iso.datetime(),
});
export type ActiveRun = z.infer<typeof ActiveRun>;

/**
 * A coordinator's lease on a run (`keys.coordinatorLease(run, epoch)`, created create-only): the holder of the
 * newest epoch coordinates; it renews its own object, and a contender takes epoch + 1 only once it expired.
 */
export const CoordinatorLease = z.object({
  epoch: z.number().int().min(0),
  /** Who holds it (host:pid), for the error a contender sees. */
  holder: z.string().min(1).max(300),
  /** Random per acquisition: tells the holder's own object from a racing writer's. */
  token: z.string().regex(/^[0-9a-f]{32}$/),
  acquiredAt: z.iso.datetime(),
  expiresAt: z.iso.datetime(),
});
export type CoordinatorLease = z.infer<typeof CoordinatorLease>;
