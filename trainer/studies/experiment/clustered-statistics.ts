/**
 * Statistics over seeds that share their held-out tasks. The seeds of one horizon are evaluated on the same
 * tasks, so their results are not independent pairs: a hard task is hard for every seed. The unit of
 * replication is the task. A difference is averaged per task across seeds (d_t = mean over seeds of a − b)
 * and its standard error taken over the tasks (sd(d_t) ÷ √T); a success rate is the mean of the per-task
 * rates with Wilson's interval at n = T distinct tasks, not at seeds × tasks.
 */
import { wilsonInterval } from '../../../shared/wilson.ts';

export interface ClusteredDifference {
  /** Distinct tasks (the clusters). */
  tasks: number;
  /** Seeds that have both methods. */
  seeds: number;
  improvement: number;
  standardError: number;
}

export interface ClusteredRate {
  tasks: number;
  seeds: number;
  rate: number;
  low: number;
  high: number;
}

/** `a[s][t]`, `b[s][t]`: seed s's result on task t; every seed has every task. */
export function clusteredDifference(a: readonly (readonly boolean[])[], b: readonly (readonly boolean[])[]): ClusteredDifference {
  const seeds = a.length;
  if (seeds === 0 || seeds !== b.length) throw new Error(`a clustered difference needs the same seeds on both sides (got ${a.length} and ${b.length})`);
  const tasks = a[0]!.length;
  if ([...a, ...b].some((s) => s.length !== tasks)) throw new Error('every seed needs a result for every task');
  if (tasks < 2) throw new Error(`a clustered difference needs at least 2 tasks, got ${tasks}`);
  const d = Array.from({ length: tasks }, (_, t) => a.reduce((sum, s, i) => sum + Number(s[t]) - Number(b[i]![t]), 0) / seeds);
  const mean = d.reduce((x, y) => x + y, 0) / tasks;
  const variance = d.reduce((x, y) => x + (y - mean) ** 2, 0) / (tasks - 1);
  return { tasks, seeds, improvement: mean, standardError: Math.sqrt(variance / tasks) };
}

export function clusteredRate(solved: readonly (readonly boolean[])[]): ClusteredRate {
  const seeds = solved.length;
  if (seeds === 0) throw new Error('a rate needs at least one seed');
  const tasks = solved[0]!.length;
  if (solved.some((s) => s.length !== tasks)) throw new Error('every seed needs a result for every task');
  const rate = solved.reduce((n, s) => n + s.filter(Boolean).length, 0) / (seeds * tasks);
  const ci = wilsonInterval(rate * tasks, tasks);
  return { tasks, seeds, rate, low: ci.low, high: ci.high };
}
