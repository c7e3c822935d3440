/**
 * The one rule by which a claim on queued work (a run, an evaluation, a model export) is taken for dead, so
 * that its work goes on elsewhere instead of staying `running`, `exporting` or `queued` for good.
 *
 * A claimant is gone when, on the host that reads the claim, its process no longer exists (or is this very
 * process, which is not running the work), or, on another host, it has shown no sign of life — its claim,
 * its heartbeat (the claimant rewrites `heartbeatAt` every CLAIM_HEARTBEAT_MS while the work runs), or the
 * work's own status — for `staleAfterMs`. The trainer box applies it on every poll (trainer/cloud/box/
 * work-queue.ts); the API applies the time part of it to an export asked for again (`retry=true`), and all of it
 * to a run resumed whose queue entry is gone (functions/http-api/queued-launchers.ts).
 */
import { hostname } from 'node:os';
import type { WorkClaim } from './schemas/index.ts';

/** How often a claimant rewrites its claim's heartbeat while the work runs. */
export const CLAIM_HEARTBEAT_MS = 60_000;

/** A claimant on another host silent this long is gone: ten missed heartbeats. */
export const STALE_CLAIM_MS = 10 * CLAIM_HEARTBEAT_MS;

/** Whether a process of this host exists (signal 0 checks without sending; EPERM: it exists, not ours). */
function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The claims whose work runs in this process now, by claimId: process-wide, as every claimant in a process
 * claims under the same `host:pid`, so that one part of it (a box's poll, an API in the same process) never
 * takes another's live claim for a dead one.
 */
const claimsRunningHere = new Set<string>();

/** The work of this claim runs in this process from now on (until `claimEndedHere`). */
export function claimRunsHere(claimId: string): void {
  claimsRunningHere.add(claimId);
}

/** The work of this claim no longer runs in this process (ended, failed, or interrupted). */
export function claimEndedHere(claimId: string): void {
  claimsRunningHere.delete(claimId);
}

/** Whether this process runs the claim's work now. */
export function claimRunningHere(claimId: string): boolean {
  return claimsRunningHere.has(claimId);
}

export interface StaleCheck {
  /** The work's own latest sign of life (its status's updatedAt), if any. */
  statusUpdatedAt?: string;
  /** Whether this process is running the work now (then its own claim is alive). */
  runningHere: boolean;
  staleAfterMs?: number;
  now?: number;
}

/** The claimant's last sign of life, in ms since the epoch. */
export function lastSignOfLife(claim: WorkClaim, statusUpdatedAt?: string): number {
  return Math.max(...[claim.claimedAt, claim.heartbeatAt, statusUpdatedAt].filter((t): t is string => t !== undefined).map((t) => Date.parse(t)));
}

/** Whether `claim`'s claimant is gone (see above). */
export function claimantGone(claim: WorkClaim, o: StaleCheck): boolean {
  const at = claim.claimedBy.lastIndexOf(':');
  const [host, pid] = [claim.claimedBy.slice(0, at), Number(claim.claimedBy.slice(at + 1))];
  if (host === hostname()) return pid === process.pid ? !o.runningHere : !processAlive(pid);
  return (o.now ?? Date.now()) - lastSignOfLife(claim, o.statusUpdatedAt) > (o.staleAfterMs ?? STALE_CLAIM_MS);
}
