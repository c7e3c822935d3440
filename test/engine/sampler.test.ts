import { describe, expect, it } from 'vitest';
import type { SamplingOptions } from '../../trainer/engine/engine.ts';
import { sampleToken, stepUniform } from '../../trainer/engine/generation/sampler.ts';

/** The sampler as it was, sorting every candidate: the definition the ranked one must agree with. */
function sortingSampler(logits: Float32Array, options: SamplingOptions, step: number, allowed?: Uint8Array): number {
  const candidates: number[] = [];
  for (let i = 0; i < logits.length; i++) if (!allowed || allowed[i]) candidates.push(i);
  if (candidates.length === 0) return -1;
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

describe('sampleToken', () => {
  let seed = 99;
  const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);

  it('draws what a full sort of the candidates draws: top-k, top-p, temperatures, masks and ties', () => {
    let draws = 0;
    const chosen = new Set<number>();
    for (const V of [1, 7, 300, 5000]) {
      for (let trial = 0; trial < 12; trial++) {
        // coarse logits make ties; a few spikes make peaked distributions
        const logits = Float32Array.from({ length: V }, () => Math.round(rand() * 16) / 4 + (rand() < 0.01 ? 8 : 0));
        const allowed = trial % 3 === 0 ? Uint8Array.from({ length: V }, () => (rand() < 0.6 ? 1 : 0)) : undefined;
        for (const temperature of [0.3, 1, 2.5]) {
          for (const topK of [0, 1, 5, 50, V + 3]) {
            for (const topP of [1, 0.9, 0.5, 0.05]) {
              const options = { temperature, topK, topP, seed: trial * 31 + topK };
              const step = Math.floor(rand() * 1000);
              const token = sampleToken(logits, options, step, allowed);
              expect(token).toBe(sortingSampler(logits, options, step, allowed));
              if (token >= 0) chosen.add(token);
              draws++;
            }
          }
        }
      }
    }
    expect(draws).toBe(4 * 12 * 3 * 5 * 4);
    expect(chosen.size).toBeGreaterThan(200); // the draws really spread over the vocabularies
  });

  it('returns −1 when the mask allows nothing, and the one allowed token when it allows one', () => {
    const logits = Float32Array.from({ length: 50 }, (_, i) => i);
    const none = new Uint8Array(50);
    expect(sampleToken(logits, { temperature: 1, topK: 0, topP: 1, seed: 1 }, 0, none)).toBe(-1);
    const one = new Uint8Array(50);
    one[17] = 1;
    expect(sampleToken(logits, { temperature: 1, topK: 0, topP: 0.5, seed: 1 }, 0, one)).toBe(17);
  });
});
