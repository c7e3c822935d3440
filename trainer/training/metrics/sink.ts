/**
 * Where a run's metrics go besides its store's rows: TensorBoard files, an MLflow server, Weights & Biases.
 * A `MetricsSink` is one destination; `RunMetrics` is how a run drives all of them. Watching a run must never
 * stop it: the run hands over each row and evaluation without waiting, every sink works through its own queue
 * in order, and a sink that fails is logged once (its secrets redacted) and left off for the rest of the run.
 */
import type { EvaluationResult, MetricsRow } from '../../../shared/schemas/index.ts';

/** How the run ended, for destinations that record it (MLflow's FINISHED/FAILED, W&B's exit code). */
export type RunOutcome = 'finished' | 'failed';

export interface MetricsSink {
  /** For the log line when it fails: `tensorboard`, `mlflow`, `wandb`. */
  readonly name: string;
  /**
   * What must never appear in a log line or an error (API keys, tokens, and any form the sink sends them in):
   * a failure's message is redacted against these before it is logged.
   */
  readonly secrets?: readonly string[];
  /** An iteration's metrics row (step = row.iteration). */
  iteration(row: MetricsRow): Promise<void>;
  /** An evaluation of θ_k (step = e.iteration); delivered once, before the row of iteration k when both exist. */
  evaluation(e: EvaluationResult): Promise<void>;
  /** The run is over; nothing is delivered after. */
  close(outcome: RunOutcome): Promise<void>;
  /** The sink failed and is off: release what it holds (timers), without a request. */
  abandon?(): void;
}

/** A line for the person running the trainer (stderr by default). */
export type MetricsLog = (line: string) => void;

/** The run's side: calls return at once; `close` waits for every sink to finish what it was given. */
export interface RunMetrics {
  iteration(row: MetricsRow): void;
  evaluation(e: EvaluationResult): void;
  close(outcome: RunOutcome): Promise<void>;
}

/** `text` with every secret (and every secret's base64, as in a Basic authorization header) replaced. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) {
    if (!s) continue;
    for (const form of [s, Buffer.from(s).toString('base64'), encodeURIComponent(s)]) out = out.split(form).join('[redacted]');
  }
  return out;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The sinks as one run drives them. Each evaluation reaches each sink once: from `evaluation` as the loop
 * reports it, or from the row that carries it when the loop did not (a resumed run reuses a stored one).
 */
export function runMetrics(sinks: readonly MetricsSink[], log: MetricsLog): RunMetrics {
  const lanes = sinks.map((sink) => ({ sink, tail: Promise.resolve(), off: false }));
  const evaluated = new Set<number>();
  let closed = false;
  const each = (call: (s: MetricsSink) => Promise<void>) => {
    for (const lane of lanes) {
      lane.tail = lane.tail.then(async () => {
        if (lane.off) return;
        try {
          await call(lane.sink);
        } catch (err) {
          lane.off = true;
          try {
            lane.sink.abandon?.();
          } catch {
            // nothing more to release
          }
          const secrets = lane.sink.secrets ?? [];
          try {
            log(redact(`metrics: ${lane.sink.name} failed, and is off for the rest of this run (the run goes on): ${message(err)}`, secrets));
          } catch {
            // a log that throws must not fail the run either
          }
        }
      });
    }
  };
  const evaluation = (e: EvaluationResult) => {
    if (closed || evaluated.has(e.iteration)) return;
    evaluated.add(e.iteration);
    each((s) => s.evaluation(e));
  };
  return {
    evaluation,
    iteration(row) {
      if (closed) return;
      if (row.evaluation) evaluation(row.evaluation);
      each((s) => s.iteration(row));
    },
    async close(outcome) {
      if (closed) return;
      closed = true;
      each((s) => s.close(outcome));
      await Promise.all(lanes.map((l) => l.tail));
    },
  };
}
