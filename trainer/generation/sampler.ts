/**
 * Picks the next token from one row's logits: greedy at temperature 0, else temperature, top-k and top-p
 * (nucleus) sampling with a uniform drawn from Philox keyed by (row seed, decode step), so a row's draw
 * never depends on the other rows of its batch or on how many draws came before.
 */
import { philox4x32 } from '../../shared/philox.ts';
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
  const candidates: number[] = [];
  for (let i = 0; i < V; i++) if (!allowed || allowed[i]) candidates.push(i);
  if (candidates.length === 0) return -1;
  // Sorting by (logit desc, id asc) makes ties and the nucleus cut deterministic.
  candidates.sort((a, b) => logits[b] - logits[a] || a - b);
  const k = options.topK > 0 ? Math.min(options.topK, candidates.length) : candidates.length;
  const inv = 1 / options.temperature;
  const max = logits[candidates[0]];
  const weights = new Float64Array(k);
  let total = 0;
  for (let j = 0; j < k; j++) {
    weights[j] = Math.exp((logits[candidates[j]] - max) * inv);
    total += weights[j];
  }
  let keep = k;
  if (options.topP < 1) {
    let mass = 0;
    for (let j = 0; j < k; j++) {
      mass += weights[j] / total;
      if (mass >= options.topP) {
        keep = j + 1;
        break;
      }
    }
  }
  let kept = 0;
  for (let j = 0; j < keep; j++) kept += weights[j];
  let u = stepUniform(options.seed, step) * kept;
  for (let j = 0; j < keep; j++) {
    u -= weights[j];
    if (u < 0) return candidates[j];
  }
  return candidates[keep - 1];
}
