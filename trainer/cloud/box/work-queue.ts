/**
 * The trainer box's queue and its claims: the QueuedWork entries the Api function writes under `queue/`,
 * listed oldest first, and the claim that lets one box process run each of them; what becomes of a run's
 * entry and claim when it ends here; a run whose claimant is gone.
 *
 * Invariant: queued work runs once, however often it is seen (a second listing, a second entry for the
 * same id, two boxes polling). Only the writer of the create-only claim at `keys.workClaim(kind, id)` runs
 * it: AWS S3 decides a create-only write atomically (If-None-Match); for servers that ignore it, each claim
 * carries a random id that is read back after `claimSettleMs`, and only the writer whose claim survived
 * runs the work. A claim is released only with its run back in the queue (interrupted here, or resumed
 * while it ended), and a claimant that is gone is never taken over: its run is marked failed, to be resumed.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { keys, parseQueuedWorkKey } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { MetricsRow, QueuedWork, RunStatus, WorkClaim, type EvaluationKeyRef, type ModelExportRequest, type WorkKind } from '../../../shared/schemas/index.ts';
import { readJson, writeJson } from '../../../shared/store/json.ts';

/** Sorts after every ISO time: an entry that cannot be read (or is gone) is tried last. */
const UNKNOWN_TIME = '~';

/** A run claimed on another host with no sign of life this long is taken for dead (longer than any iteration). */
export const DEFAULT_STALE_AFTER_MS = 6 * 3_600_000;

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
  /** A run claimed on another host with no sign of life this long is marked failed (default 6 h). */
  staleAfterMs?: number;
}

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

  /** Writes this process's claim on `work`; resolves whether it is this process's to run (see above). */
  async claim(work: RanWork): Promise<boolean> {
    const key = keys.workClaim(work.kind, work.id);
    const mine: WorkClaim = { ...work, claimId: randomBytes(16).toString('hex'), claimedBy: this.who, claimedAt: new Date().toISOString() };
    if (!(await writeJson(this.o.store, key, mine, true))) return false;
    await sleep(this.o.claimSettleMs ?? 500);
    return (await readJson(this.o.store, key, WorkClaim))?.claimId === mine.claimId;
  }

  /**
   * A run claimed by a box process that is gone is marked failed, visibly, with how to resume it (its
   * checkpoints and log are intact). Gone: on this host, a process that no longer exists; on another host
   * (a replaced instance), no sign of life — the claim, the status, the newest metrics row — for
   * `staleAfterMs`. A claimant that may still be running is left alone.
   */
  async failIfStale(run: string): Promise<boolean> {
    const store = this.o.store;
    const [claim, status] = await Promise.all([readJson(store, keys.workClaim('run', run), WorkClaim), readJson(store, keys.runStatus(run), RunStatus)]);
    if (!claim || !status || !['requested', 'running', 'stopping'].includes(status.state) || claim.claimedBy === this.who) return false;
    const [host, pid] = [claim.claimedBy.slice(0, claim.claimedBy.lastIndexOf(':')), Number(claim.claimedBy.slice(claim.claimedBy.lastIndexOf(':') + 1))];
    let gone: boolean;
    if (host === hostname()) {
      gone = !processAlive(pid);
    } else {
      const rows = (await store.list(`${keys.run(run)}metrics/`)).filter((k) => k.endsWith('.json')).sort();
      const newest = rows.length ? await readJson(store, rows[rows.length - 1]!, MetricsRow) : null;
      const lastSign = Math.max(Date.parse(claim.claimedAt), Date.parse(status.updatedAt), newest ? Date.parse(newest.finishedAt) : 0);
      gone = Date.now() - lastSign > (this.o.staleAfterMs ?? DEFAULT_STALE_AFTER_MS);
    }
    if (!gone) return false;
    const now = new Date().toISOString();
    const error = `interrupted: the trainer box process that ran it (${claim.claimedBy}, claimed ${claim.claimedAt}) is gone; its checkpoints and log are intact: resume it with \`esopt train --cloud --resume ${run}\``;
    await writeJson(store, keys.runStatus(run), RunStatus.parse({ ...status, state: 'failed', error, finishedAt: now, updatedAt: now }));
    this.o.log.warn({ run, claimedBy: claim.claimedBy }, 'stale run marked failed');
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
