/** The training progress bar on stderr (cli-progress): iteration, last mean reward, last evaluation, ETA. */
import cliProgress from 'cli-progress';
import type { EvaluationResult, MetricsRow } from '../../../shared/schemas/index.ts';

export interface TrainingProgress {
  start(resumedAt: number): void;
  iteration(row: MetricsRow): void;
  evaluation(result: EvaluationResult): void;
  stop(): void;
}

export function progressBar(total: number): TrainingProgress {
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: 'train |{bar}| iter {value}/{total} | reward {reward} | eval {success} | {seconds} s/iter | ETA {eta_formatted}',
      etaBuffer: 5,
      hideCursor: true,
      // Also when stderr is a file or pipe (CI logs), at a calmer pace.
      noTTYOutput: true,
      notTTYSchedule: 5000,
    },
    cliProgress.Presets.shades_classic,
  );
  let success = '–';
  return {
    start: (resumedAt) => bar.start(total, resumedAt, { reward: '–', success, seconds: '–' }),
    iteration: (row) =>
      bar.update(row.iteration + 1, {
        reward: row.meanReward === null ? 'n/a' : row.meanReward.toFixed(3),
        success,
        seconds: (row.durations.total / 1000).toFixed(1),
      }),
    evaluation: (e) => {
      success = `${(e.successRate * 100).toFixed(0)}% [${(e.interval.low * 100).toFixed(0)}–${(e.interval.high * 100).toFixed(0)}] @${e.iteration}`;
      bar.update({ success });
    },
    stop: () => bar.stop(),
  };
}

/** No bar (--json): nothing on stderr but errors. */
export const silentProgress: TrainingProgress = { start: () => {}, iteration: () => {}, evaluation: () => {}, stop: () => {} };
