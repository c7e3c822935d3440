/**
 * A session seen by the decode loop that notes when each of its runs starts, so one decode gives both
 * its prefill (the call's start to the second run's start: the first run and the sampling after it) and
 * each decode step (one run's start to the next's: the run, the sampling and the loop's own work).
 */
import type * as ort from 'onnxruntime-node';

export interface StepTimes {
  session: ort.InferenceSession;
  /** Forget the runs noted so far and note the call's start. */
  start(): void;
  /** Milliseconds from the call's start to the second run's start. */
  prefillMs(): number;
  /** Milliseconds between consecutive runs' starts after the first. */
  stepMs(): number[];
}

export function stepTimes(session: ort.InferenceSession): StepTimes {
  let t0 = 0;
  let starts: number[] = [];
  // only `run` is timed; the decode loop reads `inputNames` as well
  const timed = Object.create(session) as ort.InferenceSession;
  timed.run = ((...args: Parameters<ort.InferenceSession['run']>) => {
    starts.push(performance.now());
    return session.run(...args);
  }) as ort.InferenceSession['run'];
  return {
    session: timed,
    start: () => {
      starts = [];
      t0 = performance.now();
    },
    prefillMs: () => {
      if (starts.length < 2) throw new RangeError('a prefill time needs a decode of two runs or more');
      return starts[1] - t0;
    },
    stepMs: () => starts.slice(2).map((t, i) => t - starts[i + 1]),
  };
}
