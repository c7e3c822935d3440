/**
 * What the dev invoke endpoint does wrong on purpose, as configuration: throttling (429
 * TooManyRequestsException), 5xx, slow deliveries and duplicated deliveries: the ways Lambda's own
 * front door and its at-least-once async invoke misbehave. Seeded, so a faulty run replays.
 */
import { z } from 'zod';

export const LatencyDistribution = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('none') }),
  z.object({ kind: z.literal('fixed'), ms: z.number().min(0) }),
  z.object({ kind: z.literal('uniform'), minMs: z.number().min(0), maxMs: z.number().min(0) }),
  /** Heavy-tailed like real episode times: exp(N(ln medianMs, sigma²)), capped at maxMs. */
  z.object({ kind: z.literal('lognormal'), medianMs: z.number().positive(), sigma: z.number().min(0).max(3), maxMs: z.number().positive() }),
]);
export type LatencyDistribution = z.infer<typeof LatencyDistribution>;

export const InvokeFaults = z
  .object({
    /** Share of invoke calls answered 429 TooManyRequestsException before anything runs. */
    throttleRate: z.number().min(0).max(1).default(0),
    /** Share of invoke calls answered 500/502/503 before anything runs. */
    errorRate: z.number().min(0).max(1).default(0),
    /** Share of accepted async (Event) invocations delivered a second time after the first finishes. */
    duplicateRate: z.number().min(0).max(1).default(0),
    /** Extra time before the handler runs: a cold start, a slow queue, or (for benchmarks) the episode itself. */
    latency: LatencyDistribution.default({ kind: 'none' }),
    /** Invocations running at once, like a reserved concurrency; synchronous calls beyond it get 429. */
    concurrency: z.number().int().min(1).max(100_000).default(1000),
    seed: z.number().int().min(0).max(0xffffffff).default(1),
  })
  .strict();
export type InvokeFaults = z.infer<typeof InvokeFaults>;
export type InvokeFaultsInput = z.input<typeof InvokeFaults>;

/** A sample of the latency distribution from two uniforms (Box–Muller for the lognormal). */
export function sampleLatency(d: LatencyDistribution, u1: number, u2: number): number {
  switch (d.kind) {
    case 'none':
      return 0;
    case 'fixed':
      return d.ms;
    case 'uniform':
      return d.minMs + u1 * Math.max(0, d.maxMs - d.minMs);
    case 'lognormal': {
      const normal = Math.sqrt(-2 * Math.log(1 - u1)) * Math.cos(2 * Math.PI * u2);
      return Math.min(d.maxMs, d.medianMs * Math.exp(d.sigma * normal));
    }
  }
}
