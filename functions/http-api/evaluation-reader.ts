/**
 * An evaluation as the API shows it, read from the store: its request, status, plan and every episode's
 * RewardRecord, priced (evaluation-pricing.ts) and summed up with a 95% Wilson interval. Computed on every
 * read, so a running evaluation shows its episodes as they land.
 */
import { mostCommonError } from '../../shared/error-tally.ts';
import type { CostPrices } from '../../shared/cost.ts';
import { keys, parseRewardKey } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import {
  EvaluationStatus,
  RewardRecord,
  StoredEvaluationRequest,
  type EvaluationEpisode,
  type EvaluationSummary,
  type EvaluationView,
} from '../../shared/schemas/index.ts';
import { wilsonInterval } from '../../shared/wilson.ts';
import { notFound } from './errors.ts';
import { evaluationEpisodeCost } from './evaluation-pricing.ts';
import { EvaluationPlanRecord } from './evaluation-plan.ts';
import { readAllJson, readJson } from '../../shared/store/json.ts';

export function transcriptPath(id: string, index: number): string {
  return `/evaluations/${id}/episodes/${index}/transcript`;
}

/** Episode `index` as the API shows it, from its record: priced, and judged against the request's threshold. */
export function episodeOf(id: string, request: StoredEvaluationRequest, record: RewardRecord, index: number, prices: CostPrices): EvaluationEpisode {
  return {
    index,
    task: record.task,
    round: record.iteration,
    reward: record.reward,
    success: record.error === null && record.reward >= request.successThreshold,
    steps: record.steps,
    tokens: record.tokens,
    durationMs: record.durations.episodeMs,
    cost: evaluationEpisodeCost(record, request.model, prices),
    error: record.error,
    transcript: record.transcriptKey ? transcriptPath(id, index) : null,
  };
}

/** The episodes whose records are in, by index, with the record each came from. */
export async function readEpisodes(store: ObjectStore, id: string, request: StoredEvaluationRequest, plan: EvaluationPlanRecord, prices: CostPrices): Promise<Array<{ episode: EvaluationEpisode; record: RewardRecord }>> {
  const position = new Map(plan.tasks.map((t, i) => [t.id, i]));
  const recordKeys = (await store.list(keys.run(id))).filter((k) => parseRewardKey(k)?.member === 'base');
  const records = await readAllJson(store, recordKeys, RewardRecord);
  return records
    .filter((r) => position.has(r.task))
    .map((record) => {
      const index = record.iteration * plan.tasks.length + (position.get(record.task) as number);
      return { episode: episodeOf(id, request, record, index, prices), record };
    })
    .sort((a, b) => a.episode.index - b.episode.index);
}

function usd(x: number): string {
  return `$${x.toFixed(x >= 1 ? 2 : 6)}`;
}

/** ", 6 failed (most often: …)" when any failed: a 0% that is all failures must not read as a model that tried. */
function failedNote(episodes: readonly EvaluationEpisode[]): string {
  const failed = episodes.filter((e) => e.error !== null).length;
  if (!failed) return '';
  const top = mostCommonError(episodes.map((e) => e.error));
  return `, ${failed} failed${top ? ` (most often, ${top.count}×: ${top.message.slice(0, 120)})` : ''}`;
}

export function summarize(request: StoredEvaluationRequest, status: EvaluationStatus, episodes: readonly EvaluationEpisode[]): EvaluationSummary {
  const n = episodes.length;
  const successes = episodes.filter((e) => e.success).length;
  const total = episodes.reduce((a, e) => a + e.cost.usd, 0);
  const reason = status.stopReason;
  const why =
    reason === 'max-cost'
      ? `stopped early: the next episode would have passed the cost budget of ${usd(request.budget.maxCostUsd ?? 0)}`
      : reason === 'max-episodes'
        ? `stopped early: the budget allows ${request.budget.maxEpisodes} of the ${request.episodes} episodes asked for`
        : reason === 'completed'
          ? 'all episodes ran'
          : status.state === 'failed'
            ? `failed: ${status.error}`
            : status.state;
  return {
    episodes: n,
    successes,
    failed: episodes.filter((e) => e.error !== null).length,
    topError: mostCommonError(episodes.map((e) => e.error)),
    successRate: n === 0 ? 0 : successes / n,
    interval: wilsonInterval(successes, n),
    meanReward: n === 0 ? null : episodes.reduce((a, e) => a + e.reward, 0) / n,
    totalCostUsd: total,
    meanCostUsdPerEpisode: n === 0 ? null : total / n,
    stopReason: reason,
    note: `${n} of ${request.episodes} episode(s) ran, ${successes} succeeded${failedNote(episodes)}, ${usd(total)} in all; ${why}`,
  };
}

export async function readEvaluation(store: ObjectStore, id: string, prices: CostPrices): Promise<EvaluationView> {
  const [request, status, plan] = await Promise.all([
    readJson(store, keys.evaluationRequest(id), StoredEvaluationRequest),
    readJson(store, keys.evaluationStatus(id), EvaluationStatus),
    readJson(store, keys.evaluationPlan(id), EvaluationPlanRecord),
  ]);
  if (!request || !status) throw notFound('evaluation', id);
  const episodes = plan ? (await readEpisodes(store, id, request, plan, prices)).map((e) => e.episode) : [];
  return { id, request, status, episodes, summary: summarize(request, status, episodes) };
}

