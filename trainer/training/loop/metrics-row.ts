/**
 * An iteration's metrics row: what was expected, counted, failed, invalid and missing, the reward
 * statistics of the counted records, tokens and cost. A row the process died before writing is made
 * again from the iteration's UpdateRecord (with zero timings: those died with it).
 */
import { mostCommonError } from '../../../shared/error-tally.ts';
import { esAt } from '../../../shared/schedule.ts';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { EvaluationResult, IterationManifest, MetricsRow, RewardRecord, UpdateRecord, type RunConfig } from '../../../shared/schemas/index.ts';
import type { Classification } from './classify-records.ts';
import { readJson, writeJson } from '../../../shared/store/json.ts';

export type RowStats = Omit<MetricsRow, 'durations'>;

function sumCosts(records: readonly RewardRecord[]): RewardRecord['cost'] {
  return records.reduce((a, r) => ({ usd: a.usd + r.cost.usd, lambdaGbSeconds: a.lambdaGbSeconds + r.cost.lambdaGbSeconds, gpuSeconds: a.gpuSeconds + r.cost.gpuSeconds }), {
    usd: 0,
    lambdaGbSeconds: 0,
    gpuSeconds: 0,
  });
}

/** The row without its timings: `records` are the counted ones. */
export function rowStats(
  config: RunConfig,
  m: IterationManifest,
  records: readonly RewardRecord[],
  c: Pick<Classification, 'failures' | 'invalid'>,
  absent: Pick<MetricsRow, 'missing' | 'timedOut'>,
  thetaHashAfter: string,
  evaluation: EvaluationResult | null,
): RowStats {
  const rewards = records.map((r) => (r.error === null ? r.reward : (config.failedEpisodeReward ?? 0)));
  return {
    run: m.run,
    iteration: m.iteration,
    expected: m.members.length * m.tasks.length,
    counted: records.length,
    failed: c.failures.length,
    invalid: c.invalid.length,
    topError: mostCommonError(c.failures.map((f) => f.error)),
    ...absent,
    meanReward: rewards.length ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null,
    maxReward: rewards.length ? Math.max(...rewards) : null,
    successRate: rewards.length ? rewards.filter((r) => r >= config.successThreshold).length / rewards.length : null,
    tokens: records.reduce((a, r) => ({ prompt: a.prompt + r.tokens.prompt, completion: a.completion + r.tokens.completion }), { prompt: 0, completion: 0 }),
    cost: sumCosts(records),
    thetaHashAfter,
    // σ as the manifest served it, α as the schedule gives it for this iteration
    sigma: m.sigma,
    alpha: esAt(config.es, m.iteration, config.iterations).alpha,
    evaluation,
    finishedAt: new Date().toISOString(),
  };
}

async function rowFromUpdate(store: ObjectStore, config: RunConfig, m: IterationManifest, update: UpdateRecord): Promise<MetricsRow> {
  const records: RewardRecord[] = [];
  for (const { member, task } of update.counted) {
    const r = await readJson(store, keys.reward(m.run, m.iteration, member, task), RewardRecord);
    if (r) records.push(r);
  }
  const evaluation = await readJson(store, keys.evaluationOf(m.run, m.iteration), EvaluationResult);
  const arrived = new Set([...update.counted, ...update.failures].map((r) => `${r.member}/${r.task}`)).size;
  return MetricsRow.parse({
    ...rowStats(config, m, records, { failures: update.failures, invalid: update.invalidRecords }, { missing: m.members.length * m.tasks.length - arrived, timedOut: 0 }, update.thetaHashAfter, evaluation),
    durations: { manifest: 0, episodes: 0, collect: 0, update: 0, checkpoint: 0, total: 0 },
  });
}

/** A process killed between its log entry and its metrics row leaves a hole in the metrics: fill it. */
export async function fillMetricsHoles(store: ObjectStore, run: string, config: RunConfig, before: number): Promise<void> {
  for (let k = 0; k < before; k++) {
    if (await store.get(keys.metricsRow(run, k))) continue;
    const update = await readJson(store, keys.update(run, k), UpdateRecord);
    const manifest = await readJson(store, keys.manifest(run, k), IterationManifest);
    if (update && manifest) await writeJson(store, keys.metricsRow(run, k), await rowFromUpdate(store, config, manifest, update));
  }
}

/** Every stored row of the run, in iteration order. */
export async function readRows(store: ObjectStore, run: string, iterations: number): Promise<MetricsRow[]> {
  const rows: MetricsRow[] = [];
  for (let k = 0; k < iterations; k++) {
    const row = await readJson(store, keys.metricsRow(run, k), MetricsRow);
    if (row) rows.push(row);
  }
  return rows;
}
