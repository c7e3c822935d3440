/**
 * Seeded uniform randomness for environments (task generators, random policies). Counter-based on
 * Philox4x32-10, so a generator's output is a pure function of (seed, stream) on every machine, and two
 * streams of one seed never overlap.
 */
import { philox4x32 } from '../shared/philox.ts';

const SALT = 0xe1a7e5ed;

export class SeededRandom {
  private counter = 0;
  private index = 4;
  private readonly block = new Uint32Array(4);

  constructor(
    private readonly seed: number,
    private readonly stream = 0,
  ) {}

  uint32(): number {
    if (this.index === 4) {
      philox4x32(this.counter++, 0, this.stream >>> 0, 0, this.seed >>> 0, SALT, this.block);
      this.index = 0;
    }
    return this.block[this.index++];
  }

  /** Uniform in [0, 1) with 32 random bits. */
  float(): number {
    return this.uint32() / 2 ** 32;
  }

  /** Uniform integer in [0, n), without modulo bias. */
  int(n: number): number {
    if (!Number.isInteger(n) || n <= 0 || n > 2 ** 32) throw new RangeError(`int(n) needs 1 ≤ n ≤ 2^32, got ${n}`);
    const limit = 2 ** 32 - (2 ** 32 % n);
    for (;;) {
      const x = this.uint32();
      if (x < limit) return x % n;
    }
  }

  /** Uniform integer in [lo, hi] (inclusive). */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('pick from an empty list');
    return items[this.int(items.length)];
  }

  /** Fisher–Yates, in place; returns the same array. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [items[i], items[j]] = [items[j], items[i]];
    }
    return items;
  }
}

/** A 32-bit seed derived from a parent seed and integer coordinates (a task index, an attempt). */
export function deriveSeed(seed: number, a: number, b = 0, c = 0): number {
  const out = new Uint32Array(4);
  philox4x32(a >>> 0, b >>> 0, c >>> 0, 0x5eedda7a, seed >>> 0, SALT, out);
  return out[0];
}
