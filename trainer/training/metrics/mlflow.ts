/**
 * A run logged to an MLflow tracking server through its REST API (`/api/2.0/mlflow/…`): the experiment by
 * name (created when missing), one MLflow run per trainer process with the run's config as params, one
 * `runs/log-batch` per iteration and per evaluation (metrics `{key, value, timestamp, step}`, step =
 * iteration), and `runs/update` to FINISHED or FAILED when the run ends. A bearer token, when given, travels
 * only in the Authorization header. A resumed run is logged as a new MLflow run of the same name.
 */
import type { EvaluationResult, MetricsRow, RunConfig } from '../../../shared/schemas/index.ts';
import { HttpError, requestJson, type HttpOptions } from './http.ts';
import { evaluationScalars, rowScalars, type Scalar } from './scalars.ts';
import type { MetricsSink, RunOutcome } from './sink.ts';

export interface MlflowOptions {
  /** The tracking server's base URL (MLFLOW_TRACKING_URI's http(s) form), without credentials in it. */
  trackingUri: string;
  /** The experiment's name (default "Default", which every tracking server has). */
  experiment?: string;
  token?: string;
  run: string;
  config: RunConfig;
  http?: HttpOptions;
  now?: () => number;
}

/** MLflow's LogBatch limits: at most 1000 metrics and 100 params a request. */
const MAX_METRICS = 1000;
const MAX_PARAMS = 100;
/** Param values: 500 characters is what every MLflow version accepts (newer ones take 6000). */
const MAX_PARAM_VALUE = 500;

/** The config as MLflow params: one per leaf, dotted paths as keys, arrays and nulls as JSON. */
export function configParams(config: unknown, prefix = ''): Array<{ key: string; value: string }> {
  const out: Array<{ key: string; value: string }> = [];
  if (config !== null && typeof config === 'object' && !Array.isArray(config)) {
    for (const [k, v] of Object.entries(config)) {
      if (v === undefined) continue;
      out.push(...configParams(v, prefix ? `${prefix}.${k}` : k));
    }
    return out;
  }
  const text = typeof config === 'string' ? config : JSON.stringify(config);
  out.push({ key: prefix, value: text.length > MAX_PARAM_VALUE ? `${text.slice(0, MAX_PARAM_VALUE - 1)}…` : text });
  return out;
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

export class MlflowSink implements MetricsSink {
  readonly name = 'mlflow';
  readonly secrets: readonly string[];
  private readonly api: string;
  private readonly headers: Record<string, string>;
  private readonly now: () => number;
  private runId: string | null = null;

  constructor(private readonly o: MlflowOptions) {
    const base = new URL(o.trackingUri);
    if (base.username || base.password) throw new Error('ESOPT_MLFLOW_TRACKING_URI must not hold credentials: set ESOPT_MLFLOW_TOKEN');
    if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new Error(`ESOPT_MLFLOW_TRACKING_URI must be an http(s) URL, not ${base.protocol}`);
    this.api = `${o.trackingUri.replace(/\/+$/, '')}/api/2.0/mlflow`;
    this.headers = o.token ? { authorization: `Bearer ${o.token}` } : {};
    this.secrets = o.token ? [o.token] : [];
    this.now = o.now ?? Date.now;
  }

  private call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
    return requestJson(method, `${this.api}/${path}`, this.headers, body, this.o.http);
  }

  private async experimentId(): Promise<string> {
    const name = this.o.experiment ?? 'Default';
    const get = async () => {
      try {
        const r = (await this.call('GET', `experiments/get-by-name?experiment_name=${encodeURIComponent(name)}`)) as { experiment?: { experiment_id?: string } };
        return r?.experiment?.experiment_id ?? null;
      } catch (err) {
        if (err instanceof HttpError && err.status === 404) return null;
        throw err;
      }
    };
    const found = await get();
    if (found) return found;
    try {
      const r = (await this.call('POST', 'experiments/create', { name })) as { experiment_id?: string };
      if (r?.experiment_id) return r.experiment_id;
    } catch (err) {
      // created meanwhile by another run: read it again
      if (!(err instanceof HttpError && (err.body as { error_code?: string })?.error_code === 'RESOURCE_ALREADY_EXISTS')) throw err;
    }
    const again = await get();
    if (!again) throw new Error(`MLflow experiment "${name}" could be neither found nor created`);
    return again;
  }

  /** The MLflow run, created on first use with the config as params. */
  private async ensureRun(): Promise<string> {
    if (this.runId) return this.runId;
    const experimentId = await this.experimentId();
    const r = (await this.call('POST', 'runs/create', {
      experiment_id: experimentId,
      run_name: this.o.run,
      start_time: this.now(),
      tags: [
        { key: 'mlflow.runName', value: this.o.run },
        { key: 'esopt.run', value: this.o.run },
      ],
    })) as { run?: { info?: { run_id?: string; run_uuid?: string } } };
    const id = r?.run?.info?.run_id ?? r?.run?.info?.run_uuid;
    if (!id) throw new Error('MLflow runs/create answered without a run id');
    this.runId = id;
    for (const params of chunks(configParams(this.o.config), MAX_PARAMS)) await this.call('POST', 'runs/log-batch', { run_id: id, params });
    return id;
  }

  private async logMetrics(scalars: readonly Scalar[], step: number, timestamp: number): Promise<void> {
    const runId = await this.ensureRun();
    const metrics = scalars.map((s) => ({ key: s.tag, value: s.value, timestamp, step }));
    for (const batch of chunks(metrics, MAX_METRICS)) await this.call('POST', 'runs/log-batch', { run_id: runId, metrics: batch });
  }

  iteration(row: MetricsRow): Promise<void> {
    return this.logMetrics(rowScalars(row), row.iteration, Date.parse(row.finishedAt));
  }

  evaluation(e: EvaluationResult): Promise<void> {
    return this.logMetrics(evaluationScalars(e), e.iteration, this.now());
  }

  async close(outcome: RunOutcome): Promise<void> {
    const runId = await this.ensureRun();
    await this.call('POST', 'runs/update', { run_id: runId, status: outcome === 'finished' ? 'FINISHED' : 'FAILED', end_time: this.now() });
  }
}
