/**
 * The ES core, ask/tell style (evosax, OpenAI-ES): plain data in, plain data out.
 *
 *   ask(options)                           → the members of an iteration: (index, noiseIndex, sign)
 *   shapeRewards(members, rewards, s)      → each reporting member's mean reward, and its shaped R̂
 *   coefficients(weighted, R̂, α)           → one coefficient per noise index
 *   tell(members, rewards, options)        → shapeRewards then coefficients, each once
 *   applyDenseUpdate(θ, …, coefs)          → θ ← (1 − α·λ)·θ + Σ_j coef_j·ε_j, streamed chunk by chunk
 *
 * With R̂ the shaped rewards of the G members that reported, coef_j = (α/G)·Σ_{i: noise j} sign_i·R̂_i,
 * so θ ← θ + α·(1/G)·Σ_i R̂_i·sign_i·ε_i: α is the whole step (no 1/σ), exactly as in the paper.
 */
import { z } from 'zod';
import type { EsOptions, Member, Shaping } from './schemas/index.ts';
import { applyNoise, CHUNK } from './noise.ts';
import type { DeviceNoiseName } from './noise-definition.ts';

/** A named tensor of θ, viewed in place; `offset` is where it starts in each member's dense ε stream. */
export interface ParameterSegment {
  name: string;
  data: Float32Array;
  offset: number;
}

export interface Coefficient {
  noiseIndex: number;
  coef: number;
}

export interface ShapedRewards {
  /** Members that counted (had at least one reward), in index order; G = counted.length. */
  counted: Member[];
  /** Mean episode reward per counted member, aligned with `counted`. */
  memberRewards: number[];
  /** Shaped rewards R̂, aligned with `counted`. */
  normalized: number[];
}

export interface TellResult extends Omit<ShapedRewards, 'counted'> {
  /** The counted members' indices, in index order. */
  counted: number[];
  /** One per noise index that appears among the counted members, sorted by noise index. */
  coefficients: Coefficient[];
}

export type AskOptions = Pick<EsOptions, 'population' | 'antithetic'>;
/** α here is this iteration's value (shared/schedule.ts's esAt), not the run's schedule. */
export type TellOptions = Pick<EsOptions, 'shaping'> & { alpha: number };

/** The population of one iteration. Antithetic pairs share a noise index: (ε_j, −ε_j). */
export function ask(options: AskOptions): Member[] {
  const { population, antithetic } = options;
  if (antithetic && population % 2 !== 0) throw new RangeError(`antithetic sampling needs an even population, got ${population}`);
  return Array.from({ length: population }, (_, index) => ({
    index,
    noiseIndex: antithetic ? index >> 1 : index,
    sign: antithetic && index % 2 === 1 ? -1 : 1,
  }));
}

/** Z-score (R−μ)/(s+1e-8) with the population std; all-equal rewards give all zeros (no update). */
export function zscore(rewards: readonly number[]): number[] {
  const n = rewards.length;
  if (n === 0) return [];
  const mean = rewards.reduce((a, b) => a + b, 0) / n;
  const variance = rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / n;
  const std = Math.sqrt(variance);
  if (std === 0) return rewards.map(() => 0);
  return rewards.map((r) => (r - mean) / (std + 1e-8));
}

/** Centred ranks in [−0.5, 0.5] (OpenAI-ES); ties share their average rank. */
export function centeredRanks(rewards: readonly number[]): number[] {
  const n = rewards.length;
  if (n < 2) return rewards.map(() => 0);
  const order = rewards.map((r, i) => [r, i] as const).sort((a, b) => a[0] - b[0]);
  const ranks = new Array<number>(n);
  for (let lo = 0; lo < n; ) {
    let hi = lo;
    while (hi + 1 < n && order[hi + 1][0] === order[lo][0]) hi++;
    const avg = (lo + hi) / 2;
    for (let k = lo; k <= hi; k++) ranks[order[k][1]] = avg / (n - 1) - 0.5;
    lo = hi + 1;
  }
  return ranks;
}

export function shape(rewards: readonly number[], shaping: Shaping): number[] {
  switch (shaping) {
    case 'zscore':
      return zscore(rewards);
    case 'centered-rank':
      return centeredRanks(rewards);
    case 'none':
      return [...rewards];
  }
}

const FiniteRewards = z.array(z.number().finite());

/**
 * Shaping: `rewards` maps member index → its episode rewards; each member that has any is averaged,
 * and the means are shaped over those G members. Members with none are left out.
 */
export function shapeRewards(members: readonly Member[], rewards: ReadonlyMap<number, readonly number[]>, shaping: Shaping): ShapedRewards {
  const counted: Member[] = [];
  const memberRewards: number[] = [];
  for (const m of [...members].sort((a, b) => a.index - b.index)) {
    const rs = rewards.get(m.index);
    if (!rs || rs.length === 0) continue;
    const parsed = FiniteRewards.safeParse(rs);
    if (!parsed.success) throw new RangeError(`member ${m.index} has a non-finite reward: ${JSON.stringify(rs)}`);
    counted.push(m);
    memberRewards.push(rs.reduce((a, b) => a + b, 0) / rs.length);
  }
  return { counted, memberRewards, normalized: shape(memberRewards, shaping) };
}

/**
 * coef_j = (α/G)·Σ_{i: noise j} sign_i·R̂_i over the G weighted members, summed in their order (the live
 * update and a replay pass the same order, so they agree bit for bit); zero coefficients are dropped.
 */
export function coefficients(weighted: ReadonlyArray<Pick<Member, 'noiseIndex' | 'sign'>>, normalized: readonly number[], alpha: number): Coefficient[] {
  if (weighted.length !== normalized.length) throw new RangeError(`${weighted.length} members but ${normalized.length} shaped rewards`);
  const byNoise = new Map<number, number>();
  const g = weighted.length;
  weighted.forEach((m, i) => {
    byNoise.set(m.noiseIndex, (byNoise.get(m.noiseIndex) ?? 0) + m.sign * normalized[i]);
  });
  return [...byNoise.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([noiseIndex, sum]) => ({ noiseIndex, coef: g === 0 ? 0 : (alpha / g) * sum }))
    .filter((c) => c.coef !== 0);
}

/** Fold in the rewards that arrived: shaping, then the coefficients of the shaped rewards. */
export function tell(members: readonly Member[], rewards: ReadonlyMap<number, readonly number[]>, options: TellOptions): TellResult {
  const shaped = shapeRewards(members, rewards, options.shaping);
  return {
    counted: shaped.counted.map((m) => m.index),
    memberRewards: shaped.memberRewards,
    normalized: shaped.normalized,
    coefficients: coefficients(shaped.counted, shaped.normalized, options.alpha),
  };
}

/** θ += c·ε_member over every segment (full-mode perturb with c = sign·σ, restore with −c). */
export function perturbDense(segments: readonly ParameterSegment[], key: { runSeed: number; iteration: number; member: number }, c: number): void {
  for (const s of segments) applyNoise(s.data, key, c, s.offset);
}

export interface UpdateOptions {
  /** Decoupled weight decay: θ is scaled by (1 − decay) before the noise step. */
  decay?: number;
  /** Elements per pass; any multiple of the noise CHUNK gives bit-identical results. */
  chunk?: number;
  /** The run's noise definition when not the default (shared/noise-definition.ts). */
  noise?: DeviceNoiseName;
}

/**
 * θ ← (1 − decay)·θ + Σ_j coef_j·ε_j in one pass over θ: for each chunk, every member's noise is
 * regenerated into a Float64 accumulator (in noise-index order, so the result does not depend on member
 * order), then added once. Scratch memory is one chunk, whatever G is.
 */
export function applyDenseUpdate(
  segments: readonly ParameterSegment[],
  runSeed: number,
  iteration: number,
  coefficients: readonly Coefficient[],
  options: UpdateOptions = {},
): void {
  const decay = options.decay ?? 0;
  const chunk = options.chunk ?? CHUNK * 16;
  if (!Number.isInteger(chunk) || chunk <= 0) throw new RangeError(`update chunk must be a positive integer, got ${chunk}`);
  const coefs = [...coefficients].sort((a, b) => a.noiseIndex - b.noiseIndex);
  const acc = new Float64Array(chunk);
  for (const seg of segments) {
    const theta = seg.data;
    for (let pos = 0; pos < theta.length; pos += chunk) {
      const len = Math.min(chunk, theta.length - pos);
      const view = len === chunk ? acc : acc.subarray(0, len);
      view.fill(0);
      for (const { noiseIndex, coef } of coefs) applyNoise(view, { runSeed, iteration, member: noiseIndex, ...(options.noise ? { definition: options.noise } : {}) }, coef, seg.offset + pos);
      const keep = 1 - decay;
      for (let i = 0; i < len; i++) theta[pos + i] = theta[pos + i] * keep + view[i];
    }
  }
}

/** Lay tensors out back to back in each member's stream, in the given (canonical) order. */
export function layoutSegments(tensors: ReadonlyArray<{ name: string; data: Float32Array }>): ParameterSegment[] {
  let offset = 0;
  return tensors.map((t) => {
    const seg = { name: t.name, data: t.data, offset };
    offset += t.data.length;
    return seg;
  });
}
