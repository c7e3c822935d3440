/**
 * Collection: poll the store through a RewardCollector (each key read once, one record per (member,
 * task)) until the caller says it may close. Fan-out settling wakes the poller at once, so a local run
 * does not wait out a poll interval after its last episode.
 */
import type { CollectedRewards, RewardCollector } from '../../shared/store/reward-collector.ts';

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
  for (;;) {
    const wasSettled = settled;
    const snapshot = await collector.poll();
    if (options.done(snapshot, wasSettled)) return snapshot;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, options.pollMs);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
      if (settled && !wasSettled) wake();
    });
    wake = null;
  }
}
