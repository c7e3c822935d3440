/**
 * Per-owner prefix KV cache: the keys and values of token sequences a decode already computed, so the next
 * turn of an episode (whose prompt repeats the conversation so far) prefills only what is new. An owner
 * names the weights the K/V were computed with (the engine's θ version and member): entries are looked up
 * by owner only, so an entry is never served to rows on other weights. K/V of token i depend only on
 * tokens ≤ i, so any prefix of an entry is as valid as the whole. Entries are dropped least recently used
 * first once their bytes pass the budget.
 */

/** The KV caches' element type: fp32 values, or fp16 bit patterns for an fp16 export. */
export type KvData = Float32Array | Uint16Array;

export interface KvBlock {
  /** The ids whose keys and values are stored, from position 0 on. */
  tokens: readonly number[];
  /** Per layer, keys and values as [kvHeads, tokens.length, headDim] in the graph's KV dtype. */
  layers: ReadonlyArray<{ key: KvData; value: KvData }>;
}

/** A cached block whose first `length` tokens equal the prompt's. */
export interface PrefixHit {
  block: KvBlock;
  length: number;
}

interface Entry {
  owner: string;
  block: KvBlock;
  bytes: number;
}

export class PrefixCache {
  /** Every entry, least recently used first (a Map keeps insertion order; a use re-inserts). */
  private readonly lru = new Map<Entry, true>();
  private readonly byOwner = new Map<string, Set<Entry>>();
  private used = 0;

  constructor(readonly budgetBytes: number) {
    if (!Number.isSafeInteger(budgetBytes) || budgetBytes < 0) throw new RangeError(`prefixCacheBytes must be an integer ≥ 0, got ${budgetBytes}`);
  }

  /** Bytes held by the entries. */
  get bytes(): number {
    return this.used;
  }

  get size(): number {
    return this.lru.size;
  }

  /**
   * The owner's entry sharing the longest prefix with `promptIds`, that length capped at
   * promptIds.length − 1 (the last prompt token is always fed, for its logits); null when none shares one.
   */
  lookup(owner: string, promptIds: readonly number[]): PrefixHit | null {
    let best: Entry | null = null;
    let bestLength = 0;
    const cap = promptIds.length - 1;
    for (const e of this.byOwner.get(owner) ?? []) {
      const length = commonPrefix(e.block.tokens, promptIds, cap);
      if (length > bestLength) [best, bestLength] = [e, length];
    }
    if (!best) return null;
    this.touch(best);
    return { block: best.block, length: bestLength };
  }

  /**
   * Keeps `block` for `owner`. The owner's entries it extends go (their K/V are a prefix of its own); a
   * block that an entry already extends is not stored twice; a block over the whole budget is not stored.
   */
  store(owner: string, block: KvBlock): void {
    const bytes = block.layers.reduce((a, l) => a + l.key.byteLength + l.value.byteLength, 0);
    if (bytes > this.budgetBytes || block.tokens.length === 0) return;
    const mine = this.byOwner.get(owner) ?? new Set<Entry>();
    for (const e of mine) {
      const shared = commonPrefix(e.block.tokens, block.tokens, Infinity);
      if (shared === block.tokens.length) {
        this.touch(e);
        return;
      }
      if (shared === e.block.tokens.length) this.remove(e);
    }
    const entry: Entry = { owner, block, bytes };
    this.byOwner.set(owner, mine.add(entry));
    this.lru.set(entry, true);
    this.used += bytes;
    for (const oldest of this.lru.keys()) {
      if (this.used <= this.budgetBytes) break;
      this.remove(oldest);
    }
  }

  /** Drops the entries of every owner `stale` names. */
  evictWhere(stale: (owner: string) => boolean): void {
    for (const owner of [...this.byOwner.keys()]) if (stale(owner)) for (const e of this.byOwner.get(owner)!) this.remove(e);
  }

  clear(): void {
    this.lru.clear();
    this.byOwner.clear();
    this.used = 0;
  }

  private touch(e: Entry): void {
    this.lru.delete(e);
    this.lru.set(e, true);
  }

  private remove(e: Entry): void {
    if (!this.lru.delete(e)) return;
    this.used -= e.bytes;
    const mine = this.byOwner.get(e.owner)!;
    mine.delete(e);
    if (mine.size === 0) this.byOwner.delete(e.owner);
  }
}

/** How many leading ids `a` and `b` share, at most `cap`. */
function commonPrefix(a: readonly number[], b: readonly number[], cap: number): number {
  const n = Math.min(a.length, b.length, cap);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
