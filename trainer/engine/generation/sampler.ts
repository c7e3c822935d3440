/**
 * Picks the next token from one row's logits: greedy at temperature 0, else temperature, top-k and top-p
 * (nucleus) sampling with a uniform drawn from Philox keyed by (row seed, decode step), so a row's draw
 * never depends on the other rows of its batch or on how many draws came before.
 */
import { philox4x32 } from '../../../shared/philox.ts';
import type { SamplingOptions } from '../engine.ts';

const SALT = 0x7a11b0c5;
const block = new Uint32Array(4);

/** A uniform in [0, 1) for (seed, step), from 53 random bits. */
export function stepUniform(seed: number, step: number): number {
  philox4x32(step >>> 0, Math.floor(step / 2 ** 32) >>> 0, 0, 0, seed >>> 0, SALT, block);
  return ((block[0] >>> 5) * 67108864 + (block[1] >>> 6)) / 9007199254740992;
}

/**
 * `allowed`, when given, is a 0/1 mask over the vocabulary; disallowed tokens are never chosen.
 * `logits` is read, never written. Returns −1 when the mask allows nothing.
 */
export function sampleToken(logits: Float32Array, options: SamplingOptions, step: number, allowed?: Uint8Array): number {
  const V = logits.length;
  if (options.temperature === 0) {
    let best = -1;
    let bestValue = -Infinity;
    for (let i = 0; i < V; i++) {
      if (allowed && !allowed[i]) continue;
      if (logits[i] > bestValue || best < 0) {
        best = i;
        bestValue = logits[i];
      }
    }
    return best;
  }
  const ranked = new RankedCandidates(logits, allowed);
  if (ranked.size === 0) return -1;
  const k = options.topK > 0 ? Math.min(options.topK, ranked.size) : ranked.size;
  const inv = 1 / options.temperature;
  const best = ranked.next();
  const max = logits[best];
  const order = [best]; // candidates in rank order, drawn from the heap only as far as needed
  const weights: number[] = [1]; // exp((logit − max)·inv) of order[j]; exp(0) = 1
  const rank = (j: number): void => {
    while (order.length <= j) {
      const id = ranked.next();
      order.push(id);
      weights.push(Math.exp((logits[id] - max) * inv));
    }
  };
  // The normalising sum over the k best: in rank order when k is a cut (so the arithmetic is a full
  // sort's), in index order when every candidate counts (same value up to float64 rounding, without
  // ranking them all).
  let total = 0;
  if (k < ranked.size) {
    rank(k - 1);
    for (let j = 0; j < k; j++) total += weights[j];
  } else total = ranked.sumOfWeights(max, inv);
  let keep = k;
  let kept = total;
  if (options.topP < 1) {
    let mass = 0;
    for (let j = 0; j < k; j++) {
      rank(j);
      mass += weights[j] / total;
      if (mass >= options.topP) {
        keep = j + 1;
        break;
      }
    }
    kept = 0;
    for (let j = 0; j < keep; j++) kept += weights[j];
  }
  let u = stepUniform(options.seed, step) * kept;
  for (let j = 0; j < keep; j++) {
    rank(j);
    u -= weights[j];
    if (u < 0) return order[j];
  }
  rank(keep - 1);
  return order[keep - 1];
}

/**
 * The allowed token ids as a binary heap ordered by (logit descending, id ascending), the order a full
 * sort would give (ties and the nucleus cut stay deterministic). Built in O(V); each `next()` is O(log V),
 * so a draw ranks only the candidates it reaches: the top k, the nucleus, or the few before the uniform
 * lands, where sorting a large vocabulary at every draw was the sampler's main cost (docs/BENCHMARKS.md).
 */
class RankedCandidates {
  private readonly heap: Int32Array;
  /** Candidates in all. */
  readonly size: number;
  /** Candidates not yet returned by `next`: heap[0 .. remaining) is the heap. */
  private remaining: number;

  constructor(
    private readonly logits: Float32Array,
    private readonly allowed: Uint8Array | undefined,
  ) {
    this.heap = new Int32Array(logits.length);
    let n = 0;
    for (let i = 0; i < logits.length; i++) if (!allowed || allowed[i]) this.heap[n++] = i;
    for (let i = (n >> 1) - 1; i >= 0; i--) this.siftDown(i, n);
    this.size = n;
    this.remaining = n;
  }

  /** Σ exp((logit − max)·inv) over every candidate, in index order. */
  sumOfWeights(max: number, inv: number): number {
    let total = 0;
    for (let i = 0; i < this.logits.length; i++) if (!this.allowed || this.allowed[i]) total += Math.exp((this.logits[i] - max) * inv);
    return total;
  }

  /** The best candidate not yet returned. */
  next(): number {
    const top = this.heap[0];
    const last = --this.remaining;
    this.heap[0] = this.heap[last];
    this.heap[last] = top;
    this.siftDown(0, last);
    return top;
  }

  private before(a: number, b: number): boolean {
    const la = this.logits[a];
    const lb = this.logits[b];
    return la > lb || (la === lb && a < b);
  }

  private siftDown(at: number, end: number): void {
    const h = this.heap;
    for (;;) {
      const l = 2 * at + 1;
      if (l >= end) return;
      const r = l + 1;
      const child = r < end && this.before(h[r], h[l]) ? r : l;
      if (!this.before(h[child], h[at])) return;
      const t = h[at];
      h[at] = h[child];
      h[child] = t;
      at = child;
    }
  }
}
