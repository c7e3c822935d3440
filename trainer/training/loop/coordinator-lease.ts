/**
 * The coordinator's lease on a run with replicas, so that two trainers started for the same run (two boxes,
 * a box and a laptop's `esopt train --cloud --resume`) cannot both publish manifests and updates. Built on
 * create-only writes alone: epoch e is `keys.coordinatorLease(run, e)`, created once; its holder renews it
 * by rewriting its own object, and a contender may create epoch e + 1 only after e has expired or been
 * released. The holder checks before every iteration that no newer epoch exists, so a holder that stalled
 * past its expiry and was replaced stops instead of coordinating alongside its successor.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { CoordinatorLease } from '../../../shared/schemas/index.ts';
import { readJson, writeJson } from '../../../shared/store/json.ts';

export class CoordinatorConflictError extends Error {}

export interface LeaseOptions {
  /** How long the lease lasts without a renewal. */
  ttlMs: number;
  /** How often the holder renews (default ttlMs ÷ 3); 0: never (tests). */
  renewMs?: number;
  holder?: string;
}

export interface HeldLease {
  epoch: number;
  /** Throws CoordinatorConflictError if a newer epoch exists: this process no longer coordinates. */
  check(): Promise<void>;
  /** Stops renewing and marks the lease expired now, so the next coordinator need not wait. */
  release(): Promise<void>;
}

async function newest(store: ObjectStore, run: string): Promise<CoordinatorLease | null> {
  const epochs = (await store.list(keys.coordinatorLeases(run))).sort();
  const last = epochs.at(-1);
  return last ? readJson(store, last, CoordinatorLease) : null;
}

const describe = (l: CoordinatorLease) => `${l.holder} (lease epoch ${l.epoch}, until ${l.expiresAt})`;

export async function acquireCoordinatorLease(store: ObjectStore, run: string, o: LeaseOptions): Promise<HeldLease> {
  const current = await newest(store, run);
  if (current && Date.parse(current.expiresAt) > Date.now()) {
    throw new CoordinatorConflictError(`run ${run} is coordinated by ${describe(current)}: stop that trainer, or wait for its lease to expire`);
  }
  const now = Date.now();
  const mine: CoordinatorLease = {
    epoch: current ? current.epoch + 1 : 0,
    holder: o.holder ?? `${hostname()}:${process.pid}`,
    token: randomBytes(16).toString('hex'),
    acquiredAt: new Date(now).toISOString(),
    expiresAt: new Date(now + o.ttlMs).toISOString(),
  };
  const key = keys.coordinatorLease(run, mine.epoch);
  // Create-only; the read-back also catches a racing writer on a store that ignores create-only (s3rver).
  const created = await writeJson(store, key, mine, true);
  const stored = await readJson(store, key, CoordinatorLease);
  if (!created || stored?.token !== mine.token) throw new CoordinatorConflictError(`run ${run} is coordinated by ${stored ? describe(stored) : 'another trainer'}: it took the lease first`);

  const check = async () => {
    const latest = await newest(store, run);
    if (latest && latest.epoch > mine.epoch) throw new CoordinatorConflictError(`run ${run}: this trainer's coordinator lease (epoch ${mine.epoch}) was taken over by ${describe(latest)}; stopping`);
  };
  const write = async (expiresAt: number) => {
    await check();
    await writeJson(store, key, { ...mine, expiresAt: new Date(expiresAt).toISOString() });
  };
  const renewMs = o.renewMs ?? Math.floor(o.ttlMs / 3);
  // A failed renewal is left to the next one; a lost lease shows at the next iteration's check.
  const timer = renewMs > 0 ? setInterval(() => void write(Date.now() + o.ttlMs).catch(() => {}), renewMs) : null;
  timer?.unref();
  return {
    epoch: mine.epoch,
    check,
    async release() {
      if (timer) clearInterval(timer);
      await write(Date.now()).catch(() => {});
    },
  };
}
