/**
 * The one cost model. An episode costs its share of the worker (Lambda GB-seconds plus the request
 * price) and its share of the trainer box (the GPU-seconds its generated tokens took). Prices are
 * configuration, so every RewardRecord carries a cost and a stage can re-price.
 *
 * List-price defaults: AWS Lambda x86 on-demand in us-east-1 ($0.0000166667 per GB-second, $0.20 per
 * million requests) and a g5.xlarge on demand ($1.006 per hour). `gpuSecondsPerToken`, the trainer box's
 * batched decode time per generated token, has no default: it is a measurement, which the deployment
 * supplies (trainer/fanout/measured-prices.ts, ESOPT_COST_PRICES on the functions).
 */
import { z } from 'zod';
import type { Cost } from './schemas/index.ts';

export const CostPrices = z
  .object({
    lambdaUsdPerGbSecond: z.number().min(0).finite().default(0.0000166667),
    lambdaUsdPerRequest: z.number().min(0).finite().default(0.0000002),
    gpuUsdPerHour: z.number().min(0).finite().default(1.006),
    gpuSecondsPerToken: z.number().min(0).finite(),
  })
  .strict();
export type CostPrices = z.infer<typeof CostPrices>;
export type CostPricesInput = z.input<typeof CostPrices>;

export const EpisodeUsage = z.object({
  /** Worker wall time spent on this episode (Lambda bills it rounded up to the millisecond). */
  durationMs: z.number().min(0).finite(),
  /** Memory of the worker; 0 for local workers, which cost nothing beyond the box they run on. */
  memoryMb: z.number().min(0).finite(),
  completionTokens: z.number().int().min(0),
  /**
   * Episodes that shared the invocation (they run side by side in one function instance): each pays
   * 1/n of the request price and 1/n of the GB-seconds of its own duration. 0 = no invocation (local).
   */
  episodesPerInvocation: z.number().int().min(0),
});
export type EpisodeUsage = z.infer<typeof EpisodeUsage>;

export function episodeCost(usage: EpisodeUsage, prices: CostPrices): Cost {
  const u = EpisodeUsage.parse(usage);
  const share = Math.max(1, u.episodesPerInvocation);
  const lambdaGbSeconds = ((u.memoryMb / 1024) * (Math.ceil(u.durationMs) / 1000)) / share;
  const requestUsd = u.episodesPerInvocation > 0 ? prices.lambdaUsdPerRequest / u.episodesPerInvocation : 0;
  const gpuSeconds = u.completionTokens * prices.gpuSecondsPerToken;
  const usd = lambdaGbSeconds * prices.lambdaUsdPerGbSecond + requestUsd + (gpuSeconds / 3600) * prices.gpuUsdPerHour;
  return { usd, lambdaGbSeconds, gpuSeconds };
}

/** What n episodes of one shape cost: the figure docs/CLOUD.md quotes per 1,000 episodes. */
export function costOfEpisodes(n: number, usage: EpisodeUsage, prices: CostPrices): Cost {
  const one = episodeCost(usage, prices);
  return { usd: one.usd * n, lambdaGbSeconds: one.lambdaGbSeconds * n, gpuSeconds: one.gpuSeconds * n };
}

/**
 * n episodes served by R trainer replicas: R boxes bill by the hour while the fleet decodes `scaling`
 * times as many tokens per second as one box (`esopt bench replicas` measures it for R = 2), so each
 * token costs R ÷ scaling of one box's GPU time. The workers' share does not change.
 */
export function costOfEpisodesWithReplicas(n: number, usage: EpisodeUsage, replicas: number, scaling: number, prices: CostPrices): Cost {
  if (!Number.isInteger(replicas) || replicas < 1) throw new RangeError(`replicas must be a whole number ≥ 1, got ${replicas}`);
  if (!(scaling > 0) || scaling > replicas) throw new RangeError(`scaling must be in (0, ${replicas}] for ${replicas} replicas, got ${scaling}`);
  return costOfEpisodes(n, usage, { ...prices, gpuSecondsPerToken: (prices.gpuSecondsPerToken * replicas) / scaling });
}
