/**
 * The reader side of rewards: what the trainer folds in is one record per (member, task), whatever
 * the store holds. This is the second line of defence behind create-only writes: a store that lets a
 * duplicate delivery overwrite a record (s3rver ignores If-None-Match) or lists a key twice still
 * yields each (member, task) at most once, and a record whose body disagrees with its key, or does
 * not parse, is set aside as invalid rather than counted.
 */
import { keys, parseRewardKey } from '../keys.ts';
import type { ObjectStore } from '../ports/object-store.ts';
import { RewardRecord } from '../schemas/index.ts';

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
 * A reward record is a few hundred bytes (its error text is capped at 2,000 characters, transcripts are
 * stored apart and only named). Anything far larger is not a record the Episode function wrote (an
 * inlined transcript, a runaway writer): set aside unparsed, never folded into an update.
 */
export const MAX_RECORD_BYTES = 64 * 1024;

export class RewardCollector {
  private readonly seen = new Set<string>();
  private readonly byPair = new Map<string, RewardRecord>();
  private readonly invalid = new Map<string, string>();
  private duplicates = 0;

  constructor(
    private readonly store: ObjectStore,
    readonly run: string,
    readonly iteration: number,
  ) {}

  /** Reads the keys that appeared since the last poll; cheap to call repeatedly while episodes land. */
  async poll(): Promise<CollectedRewards> {
    const listed = await this.store.list(keys.rewards(this.run, this.iteration));
    const fresh = listed.filter((k) => !this.seen.has(k));
    for (let i = 0; i < fresh.length; i += READ_CONCURRENCY) {
      await Promise.all(fresh.slice(i, i + READ_CONCURRENCY).map((k) => this.read(k)));
    }
    return this.snapshot();
  }

  private async read(key: string): Promise<void> {
    if (this.seen.has(key)) {
      this.duplicates++;
      return;
    }
    this.seen.add(key);
    const parts = parseRewardKey(key);
    if (!parts || parts.run !== this.run || parts.iteration !== this.iteration) {
      this.invalid.set(key, 'not a reward key of this iteration');
      return;
    }
    const body = await this.store.get(key);
    if (body === null) {
      // Listed, then gone (deleted meanwhile): look again at the next poll.
      this.seen.delete(key);
      return;
    }
    if (body.byteLength > MAX_RECORD_BYTES) {
      this.invalid.set(key, `oversized record: ${body.byteLength} bytes, a reward record has at most ${MAX_RECORD_BYTES}`);
      return;
    }
    let record: RewardRecord;
    try {
      record = RewardRecord.parse(JSON.parse(new TextDecoder().decode(body)));
    } catch (err) {
      this.invalid.set(key, `unreadable record: ${(err as Error).message.slice(0, 300)}`);
      return;
    }
    if (record.run !== parts.run || record.iteration !== parts.iteration || record.member !== parts.member || record.task !== parts.task) {
      this.invalid.set(key, 'the record names another (run, iteration, member, task) than its key');
      return;
    }
    const pair = `${record.member}/${record.task}`;
    if (this.byPair.has(pair)) {
      this.duplicates++;
      return;
    }
    this.byPair.set(pair, record);
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
