/**
 * The reader side of rewards: each (member, task) yields at most one record, whatever the store holds
 * (duplicates, overwrites, a key listed twice), and a record that does not parse is read again at every
 * poll (a non-atomic store may be mid-write) and reported invalid only until a read finds it whole.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { keys, parseRewardKey } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { RewardRecord } from '../../../shared/schemas/index.ts';

export interface CollectedRewards {
  /** One per distinct (member, task), in key order: successes and failures alike. */
  records: RewardRecord[];
  /** Records without an error: what an update counts. */
  counted: number;
  /** Records that report a failed episode (`error` set). */
  failed: number;
  /** Keys or records seen again for a (member, task) already collected. */
  duplicatesIgnored: number;
  invalid: { key: string; reason: string }[];
}

const READ_CONCURRENCY = 32;
/**
 * With the expected pairs known, once this few are still missing their keys are read directly instead
 * of listing the iteration: one GET per missing record (a miss is a cheap 404) against a LIST of every
 * record already in, which on S3 is a page per 1,000 keys and is the slowest request of a poll. One
 * round of probes fits the reader pool.
 */
const PROBE_LIMIT = READ_CONCURRENCY;
/** Waits before reading a half-written record again: a write in place takes milliseconds. */
const REREAD_DELAYS_MS = [20, 60, 180];
/**
 * A reward record is a few hundred bytes (its error text is capped at 2,000 characters, transcripts are
 * stored apart and only named). Anything far larger is not a record the Episode function wrote (an
 * inlined transcript, a runaway writer): set aside unparsed, never folded into an update.
 */
export const MAX_RECORD_BYTES = 64 * 1024;

export interface RewardCollectorOptions {
  /** The (member, task) pairs the iteration's requests asked for: lets the last few be read by key. */
  expected?: Iterable<{ member: number | 'base'; task: string }>;
}

export class RewardCollector {
  /** Keys whose verdict is final (counted, a pair's duplicate, or invalid for good): never read again. */
  private readonly seen = new Set<string>();
  private readonly byPair = new Map<string, RewardRecord>();
  private readonly invalid = new Map<string, string>();
  private duplicates = 0;
  /** Keys queued or being read; never queued twice. */
  private readonly pending = new Set<string>();
  private readonly queue: string[] = [];
  private readers = 0;
  private drainWaiters: (() => void)[] = [];
  private readonly expectedKeys: string[] | null;
  /** The first discovery always lists, so keys outside the expected pairs already there are reported. */
  private listedOnce = false;

  constructor(
    private readonly store: ObjectStore,
    readonly run: string,
    readonly iteration: number,
    options: RewardCollectorOptions = {},
  ) {
    this.expectedKeys = options.expected ? [...new Set([...options.expected].map((p) => keys.reward(run, iteration, p.member, p.task)))] : null;
  }

  /** Reads the keys that appeared since the last poll, and those not yet read whole; cheap to call repeatedly while episodes land. */
  async poll(): Promise<CollectedRewards> {
    await this.discover();
    await this.drained();
    return this.snapshot();
  }

  /**
   * Lists the iteration's rewards and queues the keys not yet read whole for the reader pool, without
   * waiting for their reads: a caller can list again while a large batch is still being read, so a
   * record that lands late is read as soon as it is listed, not after the batch ahead of it. When the
   * expected pairs are known and at most PROBE_LIMIT of them are missing, it queues their keys instead of
   * listing (a key not there yet reads as absent and is queued again next time). The first call always
   * lists; a key outside the expected pairs that lands after the switch to reading by key is not seen
   * (it could not be counted anyway: the loop counts only its population's pairs). While a full window
   * of listed keys still waits for a reader it does not list at all: what a listing found now would
   * only queue behind them, and each listing costs the store a page per 1,000 keys.
   */
  async discover(): Promise<void> {
    if (this.queue.length >= READ_CONCURRENCY) return;
    const missing = this.listedOnce ? this.expectedKeys?.filter((key) => !this.seen.has(key)) : undefined;
    if (missing && missing.length <= PROBE_LIMIT) this.enqueue(missing);
    else {
      this.listedOnce = true;
      const listed = await this.store.list(keys.rewards(this.run, this.iteration));
      const inThisListing = new Set<string>();
      for (const key of listed) {
        if (inThisListing.has(key)) {
          // A store that lists a key twice.
          this.duplicates++;
          continue;
        }
        inThisListing.add(key);
      }
      this.enqueue(inThisListing);
    }
    while (this.readers < READ_CONCURRENCY && this.queue.length > 0) void this.reader();
  }

  private enqueue(found: Iterable<string>): void {
    for (const key of found) {
      if (this.seen.has(key) || this.pending.has(key)) continue;
      this.pending.add(key);
      this.queue.push(key);
    }
  }

  /** Settles when every key queued so far has been read (or found unreadable for now). */
  drained(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** One slot of the reader pool: a sliding window, so one slow read holds up only its own slot. */
  private async reader(): Promise<void> {
    this.readers++;
    try {
      for (let key = this.queue.shift(); key !== undefined; key = this.queue.shift()) {
        try {
          await this.read(key);
        } catch (err) {
          // read() reports its own failures; anything else is this key's failure too, not the pool's.
          this.invalid.set(key, `read failed: ${(err as Error).message.slice(0, 300)}`);
        } finally {
          this.pending.delete(key);
        }
      }
    } finally {
      this.readers--;
      if (this.pending.size === 0) for (const wake of this.drainWaiters.splice(0)) wake();
    }
  }

  private async read(key: string): Promise<void> {
    const parts = parseRewardKey(key);
    if (!parts || parts.run !== this.run || parts.iteration !== this.iteration) {
      this.settle(key, 'not a reward key of this iteration');
      return;
    }
    // A key's first read that finds it half written is retried at once, a few times: the poll that
    // closes an iteration must not be the one that catches a write in the middle.
    const firstRead = !this.invalid.has(key);
    for (let attempt = 0; ; attempt++) {
      if ((await this.readOnce(key, parts)) === 'decided' || !firstRead || attempt === REREAD_DELAYS_MS.length) return;
      await sleep(REREAD_DELAYS_MS[attempt]);
    }
  }

  /** One GET of a key: 'decided' (counted, invalid for good, or gone), or 'unreadable' for now. */
  private async readOnce(key: string, parts: NonNullable<ReturnType<typeof parseRewardKey>>): Promise<'decided' | 'unreadable'> {
    let body: Uint8Array | null;
    try {
      body = await this.store.get(key);
    } catch (err) {
      // Reported while it lasts, read again.
      this.invalid.set(key, `read failed: ${(err as Error).message.slice(0, 300)}`);
      return 'unreadable';
    }
    if (body === null) {
      // Not there yet (a probed key), or listed, then gone (deleted meanwhile): look again at the next poll.
      this.invalid.delete(key);
      return 'decided';
    }
    if (body.byteLength > MAX_RECORD_BYTES) {
      this.settle(key, `oversized record: ${body.byteLength} bytes, a reward record has at most ${MAX_RECORD_BYTES}`);
      return 'decided';
    }
    let record: RewardRecord;
    try {
      record = RewardRecord.parse(JSON.parse(new TextDecoder().decode(body)));
    } catch (err) {
      // Possibly a read in the middle of a write: not settled, read again.
      this.invalid.set(key, `unreadable record: ${(err as Error).message.slice(0, 300)}`);
      return 'unreadable';
    }
    if (record.run !== parts.run || record.iteration !== parts.iteration || record.member !== parts.member || record.task !== parts.task) {
      this.settle(key, 'the record names another (run, iteration, member, task) than its key');
      return 'decided';
    }
    this.seen.add(key);
    this.invalid.delete(key);
    const pair = `${record.member}/${record.task}`;
    if (this.byPair.has(pair)) {
      this.duplicates++;
      return 'decided';
    }
    this.byPair.set(pair, record);
    return 'decided';
  }

  /** A key whose verdict cannot change: never read again. */
  private settle(key: string, reason: string): void {
    this.seen.add(key);
    this.invalid.set(key, reason);
  }

  snapshot(): CollectedRewards {
    const records = [...this.byPair.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
    const failed = records.filter((r) => r.error !== null).length;
    return {
      records,
      counted: records.length - failed,
      failed,
      duplicatesIgnored: this.duplicates,
      invalid: [...this.invalid.entries()].map(([key, reason]) => ({ key, reason })),
    };
  }

  /** Polls until `expected` distinct records are in, the deadline passes, or the signal aborts. */
  async until(expected: number, options: { deadline: number; pollMs?: number; signal?: AbortSignal }): Promise<CollectedRewards & { complete: boolean }> {
    const pollMs = options.pollMs ?? 100;
    for (;;) {
      const got = await this.poll();
      if (got.records.length >= expected) return { ...got, complete: true };
      if (Date.now() >= options.deadline || options.signal?.aborted) return { ...got, complete: false };
      await new Promise((resolve) => setTimeout(resolve, Math.min(pollMs, Math.max(0, options.deadline - Date.now()))));
    }
  }
}
