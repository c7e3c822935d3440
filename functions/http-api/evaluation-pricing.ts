/**
 * What one evaluation episode costs. Our own models (base, checkpoint) pay what the RewardRecord says:
 * the worker's share plus the trainer box's GPU time for the generated tokens (shared/cost.ts). An
 * external model runs on somebody else's hardware, so the GPU share is taken out and the provider's
 * token prices (given with the request, default 0) are put in instead.
 */
import type { CostPrices } from '../../shared/cost.ts';
import type { Cost, RewardRecord, StoredEvaluationRequest } from '../../shared/schemas/index.ts';

export function evaluationEpisodeCost(record: Pick<RewardRecord, 'cost' | 'tokens'>, model: StoredEvaluationRequest['model'], prices: CostPrices): Cost {
  if (model.kind !== 'external') return record.cost;
  const gpuUsd = (record.cost.gpuSeconds / 3600) * prices.gpuUsdPerHour;
  const workerUsd = Math.max(0, record.cost.usd - gpuUsd);
  const providerUsd = (record.tokens.prompt * model.pricing.usdPerMillionPromptTokens + record.tokens.completion * model.pricing.usdPerMillionCompletionTokens) / 1e6;
  return { usd: workerUsd + providerUsd, lambdaGbSeconds: record.cost.lambdaGbSeconds, gpuSeconds: 0 };
}
