/**
 * Collection: poll a rewards prefix of the store, reading each new object once, until the caller says it
 * has enough. Fan-out settling wakes the poller at once, so a local run does not wait out a poll interval.
 */
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { StoredObject } from './classify-records.ts';

export interface PollOptions {
  pollMs: number;
  /** Settles when the fan-out has nothing more in flight. */
  settled: Promise<unknown>;
  /** Decides from the snapshot (and whether fan-out has settled) whether collection may close. */
  done: (snapshot: readonly StoredObject[], settled: boolean) => boolean;
}

export async function pollRecords(store: ObjectStore, prefix: string, options: PollOptions): Promise<StoredObject[]> {
  const bodies = new Map<string, Uint8Array>();
  let settled = false;
  let wake: (() => void) | null = null;
  void options.settled.finally(() => {
    settled = true;
    wake?.();
  });
  for (;;) {
    const wasSettled = settled;
    for (const key of await store.list(prefix)) {
      if (bodies.has(key)) continue;
      const body = await store.get(key);
      if (body) bodies.set(key, body);
    }
    const snapshot = [...bodies.entries()].map(([key, body]) => ({ key, body }));
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
