/**
 * The trainer box's queue and its claims: the QueuedWork entries the Api function writes under `queue/`,
 * listed oldest first, and the claim that lets one box process run each of them; what becomes of a run's
 * entry and claim when it ends here; work whose claimant is gone.
 *
 * Invariant: queued work runs once at a time, however often it is seen (a second listing, two boxes
 * polling). Only the writer of the create-only claim at `keys.workClaim(kind, id)` runs it: AWS S3 decides a
 * create-only write atomically (If-None-Match); for servers that ignore it, each claim carries a random id
 * that is read back after `claimSettleMs`, and only the writer whose claim survived runs the work. An entry
 * leaves the queue only once its work has ended (finished, failed, stopped, ready). A claim whose claimant is
 * gone (shared/stale-claim.ts, the one rule for every kind) is taken over: the work's status goes back to
 * where a box starts it, the dead claim is deleted — only if it is still that claim — and the next claim
 * runs it here: a run resumes from its log, an evaluation plays its plan again (episodes already recorded
 * are kept: records are create-only), an export is made again. (The dead claim is read again right before
 * it is deleted; two boxes taking over one claim within that read and delete could both run the work.)
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { keys, parseQueuedWorkKey } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { claimantGone, claimEndedHere, claimRunningHere, claimRunsHere, STALE_CLAIM_MS } from '../../../shared/stale-claim.ts';
import {
  EvaluationStatus,
  ModelExportStatus,
  QueuedWork,
  RunStatus,
  WorkClaim,
  type EvaluationKeyRef,
  type ModelExportRequest,
  type WorkKind,
} from '../../../shared/schemas/index.ts';
import { readJson, writeJson } from '../../../shared/store/json.ts';

/** Sorts after every ISO time: an entry that cannot be read (or is gone) is tried last. */
const UNKNOWN_TIME = '~';

/** A claim on another host with no sign of life this long is taken over (shared/stale-claim.ts). */
export const DEFAULT_STALE_AFTER_MS = STALE_CLAIM_MS;

/** States after which a kind of work has nothing left to do. */
const RUN_ENDED = new Set<RunStatus['state']>(['finished', 'failed', 'stopped']);
const EVALUATION_ENDED = new Set<EvaluationStatus['state']>(['finished', 'failed']);
const EXPORT_ENDED = new Set<ModelExportStatus['state']>(['ready', 'failed']);

export interface RanWork {
  kind: WorkKind;
  id: string;
}

/** A queue entry as listed: its key, its work, and what the entry carries for that work. */
export interface QueueEntry extends RanWork {
  key: string;
  /** The entry's queuedAt, or UNKNOWN_TIME when it could not be read. */
  queuedAt: string;
  apiKey?: EvaluationKeyRef;
  export?: ModelExportRequest;
}

export interface WorkQueueOptions {
  store: ObjectStore;
  log: Logger;
  /** How long a claim is left before it is read back. */
  claimSettleMs?: number;
  /** A claim on another host with no sign of life this long is taken over (default STALE_CLAIM_MS). */
  staleAfterMs?: number;
}

/** The work's status as far as staleness needs it: whether it ended, and its last update. */
interface WorkState {
  ended: boolean;
  updatedAt?: string;
}

export class WorkQueue {
  /** Who claims: this host and process, as a claim names its claimant. */
  readonly who = `${hostname()}:${process.pid}`;

  constructor(private readonly o: WorkQueueOptions) {}

  /** The entries queued now whose kind `lane` takes, oldest first (ties by key). */
  async list(lane: (kind: WorkKind) => boolean): Promise<QueueEntry[]> {
    const listed = (await this.o.store.list(keys.workQueue())).flatMap((key) => {
      const work = parseQueuedWorkKey(key);
      return work && lane(work.kind) ? [{ key, ...work }] : [];
    });
    const entries = await Promise.all(
      listed.map(async (e) => {
        const queued = await this.readEntry(e.key);
        return { ...e, queuedAt: queued?.queuedAt ?? UNKNOWN_TIME, apiKey: queued?.apiKey, export: queued?.export };
      }),
    );
    entries.sort((a, b) => a.queuedAt.localeCompare(b.queuedAt) || a.key.localeCompare(b.key));
    return entries;
  }

  /** Whether any entry, of any kind, is queued now. */
  async anyQueued(): Promise<boolean> {
    return (await this.o.store.list(keys.workQueue())).length > 0;
  }

  /** The entry is done with: it goes from the queue (its claim stays, so a second entry for it is not run). */
  async remove(entry: QueueEntry): Promise<void> {
    await this.o.store.delete(entry.key);
  }

  private async readEntry(key: string): Promise<QueuedWork | null> {
    try {
      return await readJson(this.o.store, key, QueuedWork);
    } catch (err) {
      this.o.log.error({ key, error: (err as Error).message }, 'unreadable queue entry; ordered last');
      return null;
    }
  }

  /** Writes this process's claim on `work`; resolves with it when it is this process's to run (see above), else null. */
  async claim(work: RanWork): Promise<WorkClaim | null> {
    const key = keys.workClaim(work.kind, work.id);
    const now = new Date().toISOString();
    const mine: WorkClaim = { ...work, claimId: randomBytes(16).toString('hex'), claimedBy: this.who, claimedAt: now, heartbeatAt: now };
    if (!(await writeJson(this.o.store, key, mine, true))) return null;
    await sleep(this.o.claimSettleMs ?? 500);
    if ((await readJson(this.o.store, key, WorkClaim))?.claimId !== mine.claimId) return null;
    claimRunsHere(mine.claimId);
    return mine;
  }

  /** The work of `mine` is no longer running in this process (ended, failed, or interrupted). */
  finished(mine: WorkClaim): void {
    claimEndedHere(mine.claimId);
  }

  /** Says the claimant lives: rewrites the claim's heartbeat, while the claim is still `mine`. */
  async heartbeat(mine: WorkClaim): Promise<void> {
    const key = keys.workClaim(mine.kind, mine.id);
    if ((await readJson(this.o.store, key, WorkClaim))?.claimId !== mine.claimId) return;
    await writeJson(this.o.store, key, { ...mine, heartbeatAt: new Date().toISOString() });
  }

  /** Whether the entry's work has ended, and its status's last update. */
  private async state(entry: QueueEntry): Promise<WorkState> {
    const store = this.o.store;
    if (entry.kind === 'run') {
      const status = await readJson(store, keys.runStatus(entry.id), RunStatus);
      return { ended: status !== null && RUN_ENDED.has(status.state), updatedAt: status?.updatedAt };
    }
    if (entry.kind === 'evaluation') {
      const status = await readJson(store, keys.evaluationStatus(entry.id), EvaluationStatus);
      return { ended: status !== null && EVALUATION_ENDED.has(status.state), updatedAt: status?.updatedAt };
    }
    // An export entry that names nothing to export has nothing to do.
    if (!entry.export) return { ended: true };
    const status = await readJson(store, keys.modelExportStatus(entry.export.run, entry.export.iteration, entry.export.format), ModelExportStatus);
    return { ended: status !== null && EXPORT_ENDED.has(status.state), updatedAt: status?.updatedAt };
  }

  /** Whether the entry's work has nothing left to do (then its entry may go). */
  async ended(entry: QueueEntry): Promise<boolean> {
    return (await this.state(entry)).ended;
  }

  /**
   * The entry's work claimed by a claimant that is gone (shared/stale-claim.ts) is made this box's to claim:
   * its status goes back to where a box starts it, and the dead claim is deleted if it is still that one.
   * Resolves whether it was taken over; a claimant that may still be running is left alone.
   */
  async takeOverStale(entry: QueueEntry): Promise<boolean> {
    const store = this.o.store;
    const key = keys.workClaim(entry.kind, entry.id);
    const claim = await readJson(store, key, WorkClaim);
    if (!claim) return true;
    const state = await this.state(entry);
    if (state.ended || !claimantGone(claim, { statusUpdatedAt: state.updatedAt, runningHere: claimRunningHere(claim.claimId), staleAfterMs: this.o.staleAfterMs })) return false;
    const now = new Date().toISOString();
    if (entry.kind === 'evaluation') {
      // The box starts only a `queued` evaluation; its plan is made again, its recorded episodes kept.
      const status = await readJson(store, keys.evaluationStatus(entry.id), EvaluationStatus);
      if (status?.state === 'running') await writeJson(store, keys.evaluationStatus(entry.id), EvaluationStatus.parse({ ...status, state: 'queued', updatedAt: now }));
    } else if (entry.kind === 'export' && entry.export) {
      const statusKey = keys.modelExportStatus(entry.export.run, entry.export.iteration, entry.export.format);
      const status = await readJson(store, statusKey, ModelExportStatus);
      if (status?.state === 'exporting') await writeJson(store, statusKey, ModelExportStatus.parse({ ...status, state: 'queued', updatedAt: now }));
    }
    // A run needs nothing: the launcher resumes a `running` or `requested` run from its log.
    if ((await readJson(store, key, WorkClaim))?.claimId !== claim.claimId) return false;
    await store.delete(key);
    this.o.log.warn({ kind: entry.kind, id: entry.id, claimedBy: claim.claimedBy, claimedAt: claim.claimedAt, heartbeatAt: claim.heartbeatAt }, 'claimant gone: work taken over');
    return true;
  }

  /**
   * A run this box stopped (a hand-over to the artifact `handingOverTo`, or the service stopping: null) goes
   * back to `requested`, its claim released: the next box start claims it again and the loop resumes it from
   * its log. Not one that was asked to stop (stop.json), nor one that ended on its own meanwhile.
   */
  async requeueInterrupted(run: string, handingOverTo: string | null): Promise<boolean> {
    const store = this.o.store;
    const status = await readJson(store, keys.runStatus(run), RunStatus);
    if (!status || status.state !== 'stopped' || status.stopReason !== 'requested' || (await store.get(keys.stopRequest(run))) !== null) return false;
    const now = new Date().toISOString();
    await writeJson(store, keys.runStatus(run), RunStatus.parse({ ...status, state: 'requested', finishedAt: null, stopReason: null, updatedAt: now }));
    await store.delete(keys.workClaim('run', run));
    this.o.log.info({ run, to: handingOverTo }, handingOverTo ? 'run handed over: back in the queue, resumed by the new artifact' : 'run interrupted by the service stopping: back in the queue, resumed at the next start');
    return true;
  }

  /**
   * A run that is `requested` again once this box is done with it was resumed (POST /runs/{id}/resume)
   * after its status said it ended and before its entry went: the entry is the resume's, so it stays, and
   * the claim goes, so that the next poll claims and resumes it.
   */
  async resumedMeanwhile(run: string): Promise<boolean> {
    const status = await readJson(this.o.store, keys.runStatus(run), RunStatus);
    if (status?.state !== 'requested') return false;
    await this.o.store.delete(keys.workClaim('run', run));
    this.o.log.info({ run }, 'run resumed while it ended here: left in the queue');
    return true;
  }
}
