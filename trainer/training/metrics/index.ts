/** The metrics sinks a run opens: TensorBoard files in its store. */
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import type { RunConfig } from '../../../shared/schemas/index.ts';
import type { HttpOptions } from './http.ts';
import { runMetrics, type MetricsLog, type MetricsSink, type RunMetrics } from './sink.ts';
import { TensorBoardSink } from './tensorboard.ts';

export * from './sink.ts';
export * from './scalars.ts';
export { TensorBoardSink, encodeEvent, tfRecord, maskedCrc32c, crc32c, FILE_VERSION } from './tensorboard.ts';

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
  const sinks: MetricsSink[] = [new TensorBoardSink(o.store, o.run)];
  return sinks;
}

/** The run's metrics, every sink its settings open, driven as `runMetrics` drives them. */
export function openRunMetrics(o: MetricsSinksOptions & { extra?: readonly MetricsSink[] }): RunMetrics {
  return runMetrics([...metricsSinks(o), ...(o.extra ?? [])], o.log);
}
