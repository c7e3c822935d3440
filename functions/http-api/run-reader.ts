/**
 * What the API knows about a run, read from the store exactly as the ES loop writes it (shared/keys.ts):
 * config.json, metrics/{k}.json, evaluations/{k}.json, checkpoints/{k}/meta.json, the in-flight
 * iteration's manifest and reward records, plus the API's own status.json and stop.json.
 */
import { mostCommonError } from '../../shared/error-tally.ts';
import { keys, parseCheckpointIteration, parseRunConfigKey, parseRewardKey } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import {
  CheckpointMeta,
  EvaluationResult,
  IterationManifest,
  LogEntry,
  MetricsRow,
  RunConfig,
  RunStatus,
  type CheckpointList,
  type MetricsSeries,
  type RunDetail,
  type RunSummary,
} from '../../shared/schemas/index.ts';
import { notFound } from './errors.ts';
import { readAllJson, readJson } from '../../shared/store/json.ts';

export async function readConfig(store: ObjectStore, run: string): Promise<RunConfig> {
  const config = await readJson(store, keys.config(run), RunConfig);
  if (!config) throw notFound('run', run);
  return config;
}

export function readStatus(store: ObjectStore, run: string): Promise<RunStatus | null> {
  return readJson(store, keys.runStatus(run), RunStatus);
}

export async function stopRequested(store: ObjectStore, run: string): Promise<boolean> {
  return (await store.get(keys.stopRequest(run))) !== null;
}

export async function readMetricsRows(store: ObjectStore, run: string): Promise<MetricsRow[]> {
  const rowKeys = (await store.list(`${keys.run(run)}metrics/`)).filter((k) => k.endsWith('.json'));
  return readAllJson(store, rowKeys, MetricsRow);
}

export async function readEvaluations(store: ObjectStore, run: string): Promise<EvaluationResult[]> {
  const evalKeys = (await store.list(`${keys.run(run)}evaluations/`)).filter((k) => k.endsWith('.json'));
  return readAllJson(store, evalKeys, EvaluationResult);
}

/** The run's newest evaluation (keys sort by iteration), or null before the first. */
async function readLatestEvaluation(store: ObjectStore, run: string): Promise<EvaluationResult | null> {
  const evalKeys = (await store.list(`${keys.run(run)}evaluations/`)).filter((k) => k.endsWith('.json')).sort();
  return evalKeys.length ? readJson(store, evalKeys[evalKeys.length - 1]!, EvaluationResult) : null;
}

export async function readMetricsSeries(store: ObjectStore, run: string): Promise<MetricsSeries> {
  await readConfig(store, run);
  const [rows, evaluations] = await Promise.all([readMetricsRows(store, run), readEvaluations(store, run)]);
  return { run, rows, evaluations };
}

export async function readCheckpoints(store: ObjectStore, run: string): Promise<CheckpointList> {
  await readConfig(store, run);
  const metaKeys = (await store.list(keys.checkpoints(run))).filter((k) => parseCheckpointIteration(k) !== null);
  return { run, checkpoints: await readAllJson(store, metaKeys, CheckpointMeta) };
}

/** A run without a status object was started outside the API: finished once every iteration has a row. */
function stateOf(status: RunStatus | null, completed: number, config: RunConfig): RunSummary['state'] {
  if (status) return status.state;
  return completed >= config.iterations ? 'finished' : 'unknown';
}

async function summaryFrom(store: ObjectStore, run: string, config: RunConfig, status: RunStatus | null): Promise<RunSummary> {
  const rowKeys = (await store.list(`${keys.run(run)}metrics/`)).filter((k) => k.endsWith('.json'));
  const [latest, heldOut] = await Promise.all([rowKeys.length ? readJson(store, rowKeys[rowKeys.length - 1], MetricsRow) : null, readLatestEvaluation(store, run)]);
  return {
    id: run,
    name: config.name ?? null,
    state: stateOf(status, rowKeys.length, config),
    environment: config.environment.name,
    completedIterations: rowKeys.length,
    iterations: config.iterations,
    latest,
    heldOut: heldOut && {
      iteration: heldOut.iteration,
      tasks: heldOut.tasks,
      successRate: heldOut.successRate,
      interval: heldOut.interval,
      failed: heldOut.failed,
      topError: mostCommonError(heldOut.perTask.map((t) => t.error)),
    },
    requestedAt: status?.requestedAt ?? null,
  };
}

export async function readRunSummary(store: ObjectStore, run: string): Promise<RunSummary> {
  const [config, status] = await Promise.all([readConfig(store, run), readStatus(store, run)]);
  return summaryFrom(store, run, config, status);
}

/** The iteration after the last metrics row, if its manifest is out: how many of its records are in. */
export async function readCurrentIteration(store: ObjectStore, run: string, next: number): Promise<RunDetail['current']> {
  const manifest = await readJson(store, keys.manifest(run, next), IterationManifest);
  if (!manifest) return null;
  // Base records under the same prefix are the evaluation's, not the population's.
  const arrived = (await store.list(keys.rewards(run, next))).filter((k) => {
    const parsed = parseRewardKey(k);
    return parsed !== null && parsed.member !== 'base';
  }).length;
  return { iteration: next, expected: manifest.members.length * manifest.tasks.length, arrived };
}

export async function readRunDetail(store: ObjectStore, run: string): Promise<RunDetail> {
  const [config, status, stop] = await Promise.all([readConfig(store, run), readStatus(store, run), stopRequested(store, run)]);
  const summary = await summaryFrom(store, run, config, status);
  const next = summary.latest ? summary.latest.iteration + 1 : 0;
  const current = next < config.iterations && !(status && ['stopped', 'failed', 'finished'].includes(status.state)) ? await readCurrentIteration(store, run, next) : null;
  return { ...summary, config, status, current, stopRequested: stop };
}

/** The updates the run's log has committed: θ_k exists for every k up to this. */
export async function readCommittedUpdates(store: ObjectStore, run: string): Promise<number> {
  const body = await store.get(keys.log(run));
  if (!body) return 0;
  const lines = new TextDecoder().decode(body).split('\n').filter((line) => line.trim() !== '');
  const last = lines.at(-1);
  if (last === undefined) return 0;
  const entry = LogEntry.safeParse(JSON.parse(last));
  if (!entry.success) throw new Error(`${keys.log(run)}: its last line is not a log entry (${entry.error.issues[0]?.message})`);
  return entry.data.iteration + 1;
}
