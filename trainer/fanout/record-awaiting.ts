/**
 * A fan-out that settles a request only once its reward record is in the store. The ES loop reads a
 * settled dispatch as "nothing more is coming" and closes the iteration at the next listing
 * (trainer/training/loop/episodes.ts); the local pool settles that way by itself, but Lambda's `Event` invoke
 * returns as soon as the event is queued, long before the episode has run. Wrapped in this, the Event
 * fan-out keeps the loop's contract: each accepted request settles when its record is listed, when the
 * dispatch is cancelled (the iteration closed), or when its per-episode time has passed; and all at
 * once when the caller says it has read every record (`recordsIn`), so the loop, whose own collection
 * lists more often, does not wait for this wrapper's next listing after its last record.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { keys } from '../../shared/keys.ts';
import type { DispatchOptions, DispatchOutcome, Fanout } from '../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';

export class RecordAwaitingFanout implements Fanout {
  constructor(
    private readonly inner: Fanout,
    private readonly store: ObjectStore,
    // Its own listing matters only for records that never come: the loop's collection lists more often
    // and says when it has them all (`recordsIn`). So once a second, not at the collection's pace.
    private readonly pollMs = 1_000,
  ) {}

  async dispatch(requests: Parameters<Fanout['dispatch']>[0], options: DispatchOptions): Promise<DispatchOutcome[]> {
    const outcomes = await this.inner.dispatch(requests, options);
    const deadline = Date.now() + options.timeoutMs;
    // Accepted and not yet seen in the store: reward key → its outcome's index, grouped by rewards prefix.
    const pending = new Map<string, Map<string, number>>();
    outcomes.forEach((o, i) => {
      if (!o.ok || o.record) return;
      const { run, iteration, member, task } = o.request;
      const prefix = keys.rewards(run, iteration);
      if (!pending.has(prefix)) pending.set(prefix, new Map());
      pending.get(prefix)!.set(keys.reward(run, iteration, member, task.id), i);
    });
    // Either way the episode ran out of time: its own limit, or the iteration's close.
    const giveUp = (why: string) => {
      for (const group of pending.values()) for (const i of group.values()) outcomes[i] = { request: outcomes[i]!.request, ok: false, error: why, timedOut: true };
      pending.clear();
    };
    const wake = AbortSignal.any([options.signal, options.recordsIn].filter((s): s is AbortSignal => s !== undefined));
    while (pending.size > 0) {
      if (options.recordsIn?.aborted) {
        // The caller read them all: every accepted request's record is in the store.
        pending.clear();
        break;
      }
      if (options.signal?.aborted) {
        giveUp('cancelled before its record arrived');
        break;
      }
      if (Date.now() >= deadline) {
        giveUp(`accepted, but no record within ${options.timeoutMs} ms`);
        break;
      }
      for (const [prefix, group] of pending) {
        const listed = new Set(await this.store.list(prefix));
        for (const key of group.keys()) if (listed.has(key)) group.delete(key);
        if (group.size === 0) pending.delete(prefix);
      }
      if (pending.size === 0) break;
      await sleep(this.pollMs, undefined, { signal: wake }).catch(() => {});
    }
    return outcomes;
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
