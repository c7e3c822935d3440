/**
 * σ and α over the iterations of a run: a constant (a plain number, as before) or a schedule — `linear` or
 * `cosine` from `initial` to `final`, `step` (× `factor` every `every` iterations, never below `final`) —
 * after an optional linear warm-up of `warmup` iterations that rises to `initial`. Pure functions of the
 * iteration and the run's length, so the live loop, resume and every replica compute the same value; the
 * manifest and the log also record each iteration's σ and α, so replay never recomputes them.
 */
import { z } from 'zod';

const Positive = z.number().positive().finite();
const Warmup = z.number().int().min(0).max(1_000_000).default(0);

export const Schedule = z.union([
  Positive,
  z.discriminatedUnion('schedule', [
    z.object({ schedule: z.literal('constant'), value: Positive, warmup: Warmup }).strict(),
    z.object({ schedule: z.literal('linear'), initial: Positive, final: z.number().min(0).finite(), warmup: Warmup }).strict(),
    z.object({ schedule: z.literal('cosine'), initial: Positive, final: z.number().min(0).finite(), warmup: Warmup }).strict(),
    z
      .object({ schedule: z.literal('step'), initial: Positive, factor: z.number().gt(0).max(1), every: z.number().int().min(1), final: z.number().min(0).finite().default(0), warmup: Warmup })
      .strict(),
  ]),
]);
export type Schedule = z.output<typeof Schedule>;

/** The value at iteration k (0-based) of a run of `iterations`. */
export function scheduleAt(s: Schedule, k: number, iterations: number): number {
  if (typeof s === 'number') return s;
  const start = s.schedule === 'constant' ? s.value : s.initial;
  if (k < s.warmup) return (start * (k + 1)) / (s.warmup + 1);
  const t = k - s.warmup;
  const span = Math.max(1, iterations - s.warmup - 1);
  const progress = Math.min(1, t / span);
  switch (s.schedule) {
    case 'constant':
      return s.value;
    case 'linear':
      return s.initial + (s.final - s.initial) * progress;
    case 'cosine':
      return s.final + ((s.initial - s.final) * (1 + Math.cos(Math.PI * progress))) / 2;
    case 'step':
      return Math.max(s.final, s.initial * s.factor ** Math.floor(t / s.every));
  }
}

/** Iteration k's σ and α under a run's ES options (their schedules over `iterations`). */
export function esAt(es: { sigma: Schedule; alpha: Schedule }, k: number, iterations: number): { sigma: number; alpha: number } {
  return { sigma: scheduleAt(es.sigma, k, iterations), alpha: scheduleAt(es.alpha, k, iterations) };
}
