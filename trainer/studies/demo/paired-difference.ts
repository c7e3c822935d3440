/**
 * Before/after success on the same held-out tasks is paired data: the improvement is the mean of the
 * per-task differences d_i = after_i − before_i ∈ {−1, 0, 1}, and its standard error is the sample standard
 * deviation of d over √n (the paired t statistic's denominator). Pairing removes the between-task variance
 * that an unpaired two-proportion SE would count twice; both are reported.
 */
export interface PairedDifference {
  tasks: number;
  before: number;
  after: number;
  /** after − before, as success rates. */
  improvement: number;
  /** Standard error of the paired mean difference. */
  standardError: number;
  /** improvement / standardError (Infinity when every task moved the same way, 0 when nothing moved). */
  standardErrors: number;
  /** The unpaired two-proportion SE √(p₁q₁/n + p₂q₂/n), for readers who expect it. */
  unpairedStandardError: number;
  /** Tasks solved only after / only before. */
  gained: number;
  lost: number;
}

export function pairedDifference(before: readonly boolean[], after: readonly boolean[]): PairedDifference {
  const n = before.length;
  if (n !== after.length) throw new Error(`paired difference needs the same tasks before and after (got ${n} and ${after.length})`);
  if (n < 2) throw new Error(`paired difference needs at least 2 tasks, got ${n}`);
  const d = before.map((b, i) => Number(after[i]) - Number(b));
  const mean = d.reduce((a, x) => a + x, 0) / n;
  const variance = d.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1);
  const standardError = Math.sqrt(variance / n);
  const p1 = before.filter(Boolean).length / n;
  const p2 = after.filter(Boolean).length / n;
  return {
    tasks: n,
    before: p1,
    after: p2,
    improvement: mean,
    standardError,
    standardErrors: standardError === 0 ? (mean === 0 ? 0 : mean > 0 ? Infinity : -Infinity) : mean / standardError,
    unpairedStandardError: Math.sqrt((p1 * (1 - p1)) / n + (p2 * (1 - p2)) / n),
    gained: d.filter((x) => x > 0).length,
    lost: d.filter((x) => x < 0).length,
  };
}
