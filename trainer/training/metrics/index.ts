/**
 * The metrics sinks a run opens: TensorBoard files in its store always; MLflow when
 * ESOPT_MLFLOW_TRACKING_URI is set (ESOPT_MLFLOW_EXPERIMENT, ESOPT_MLFLOW_TOKEN); Weights & Biases when
 * ESOPT_WANDB_API_KEY and ESOPT_WANDB_PROJECT are (ESOPT_WANDB_ENTITY, ESOPT_WANDB_BASE_URL). A sink that
 * cannot be opened from its settings is logged and left out; the run goes on.
 */
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import type { RunConfig } from '../../../shared/schemas/index.ts';
import type { HttpOptions } from './http.ts';
import { MlflowSink } from './mlflow.ts';
import { redact, runMetrics, type MetricsLog, type MetricsSink, type RunMetrics } from './sink.ts';
import { TensorBoardSink } from './tensorboard.ts';
import { WandbSink } from './wandb.ts';

export * from './sink.ts';
export * from './scalars.ts';
export { TensorBoardSink, encodeEvent, tfRecord, maskedCrc32c, crc32c, FILE_VERSION } from './tensorboard.ts';
export { MlflowSink, configParams } from './mlflow.ts';
export { WandbSink, WANDB_DEFAULT_BASE_URL } from './wandb.ts';

export interface MetricsSinksOptions {
  store: ObjectStore;
  run: string;
  config: RunConfig;
  /** Where the settings are read (default process.env). */
  env?: Record<string, string | undefined>;
  log: MetricsLog;
  /** The tracking servers' request limits (tests shorten them). */
  http?: HttpOptions;
}

/** Lines to stderr: the default log of a run's sinks. */
export const stderrLog: MetricsLog = (line) => void process.stderr.write(`${line}\n`);

export function metricsSinks(o: MetricsSinksOptions): MetricsSink[] {
  const env = o.env ?? process.env;
  const sinks: MetricsSink[] = [new TensorBoardSink(o.store, o.run)];
  const open = (name: string, secrets: Array<string | undefined>, make: () => MetricsSink) => {
    try {
      sinks.push(make());
    } catch (err) {
      o.log(redact(`metrics: ${name} is off for this run: ${err instanceof Error ? err.message : String(err)}`, secrets.filter((s): s is string => !!s)));
    }
  };
  const mlflowUri = env.ESOPT_MLFLOW_TRACKING_URI?.trim();
  if (mlflowUri) {
    const token = env.ESOPT_MLFLOW_TOKEN || undefined;
    open('mlflow', [token], () => new MlflowSink({ trackingUri: mlflowUri, experiment: env.ESOPT_MLFLOW_EXPERIMENT || undefined, token, run: o.run, config: o.config, http: o.http }));
  }
  const wandbKey = env.ESOPT_WANDB_API_KEY?.trim();
  const wandbProject = env.ESOPT_WANDB_PROJECT?.trim();
  if (wandbKey && wandbProject) {
    open('wandb', [wandbKey], () => new WandbSink({ apiKey: wandbKey, project: wandbProject, entity: env.ESOPT_WANDB_ENTITY || undefined, baseUrl: env.ESOPT_WANDB_BASE_URL || undefined, run: o.run, config: o.config, http: o.http }));
  } else if (wandbKey || wandbProject) {
    o.log(`metrics: wandb is off for this run: it needs both ESOPT_WANDB_API_KEY and ESOPT_WANDB_PROJECT (${wandbKey ? 'the project' : 'the API key'} is not set)`);
  }
  return sinks;
}

/** The run's metrics, every sink its settings open, driven as `runMetrics` drives them. */
export function openRunMetrics(o: MetricsSinksOptions & { extra?: readonly MetricsSink[] }): RunMetrics {
  return runMetrics([...metricsSinks(o), ...(o.extra ?? [])], o.log);
}
