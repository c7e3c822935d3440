/**
 * Collection: list the store through a RewardCollector (each key read once, one record per (member,
 * task)) until the caller says it may close. Listing runs every `pollMs` while the reads of earlier
 * listings are still going on, so a record that lands late is read as soon as it is listed instead of
 * after the batch ahead of it; fan-out settling wakes the lister at once, so a local run does not wait
 * out a poll interval after its last episode.
 */
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { RewardCollector, type CollectedRewards } from './reward-collector.ts';

export interface CollectOptions {
  pollMs: number;
  /** Settles when the fan-out has nothing more in flight. */
  settled: Promise<unknown>;
  /** Decides from a snapshot (and whether fan-out had settled before it was taken) whether to close. */
  done: (snapshot: CollectedRewards, settled: boolean) => boolean;
}

export async function collectUntil(collector: RewardCollector, options: CollectOptions): Promise<CollectedRewards> {
  let settled = false;
  let wake: (() => void) | null = null;
  void options.settled.finally(() => {
    settled = true;
    wake?.();
  });
  /** Until `at`, or until the fan-out settles if it had not when the cycle began. */
  const cycleEnd = (at: number, wasSettled: boolean) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, at - Date.now()));
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
      if (settled && !wasSettled) wake();
    }).finally(() => (wake = null));
  for (;;) {
    const wasSettled = settled;
    const over = cycleEnd(Date.now() + options.pollMs, wasSettled);
    if (wasSettled) {
      // Settled: nothing more will land, so the close is decided on a look that began after the
      // settling, read whole. The reads still in flight began before it: a key read by one of them
      // (a probe of a missing record) may have landed since, and discovery skips keys being read, so
      // they finish first and a poll (discover, then drain) then asks again for whatever they did not find.
      await collector.drained();
      await collector.poll();
    } else {
      // Decide as soon as the reads drain, or when the cycle is over (list again then, with the rest
      // of the reads still going on).
      await collector.discover();
      await Promise.race([collector.drained(), over]);
    }
    const snapshot = collector.snapshot();
    if (options.done(snapshot, wasSettled)) return snapshot;
    await over;
  }
}

/**
 * One iteration's reward records, collected as the loop collects them (each key read once, one record per
 * (member, task); `expected` pairs are read by key once few are missing) until `done` says to close.
 */
export function collectRewards(store: ObjectStore, run: string, iteration: number, o: CollectOptions & { expected?: Iterable<{ member: number | 'base'; task: string }> }): Promise<CollectedRewards> {
  return collectUntil(new RewardCollector(store, run, iteration, { expected: o.expected }), o);
}
