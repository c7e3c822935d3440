/**
 * The Wilson score interval for a binomial proportion: unlike the normal approximation it stays inside
 * [0, 1] and is honest at 0/n and n/n, which is exactly where small evaluations of an untrained model sit.
 */
export function wilsonInterval(successes: number, n: number, z = 1.959963984540054): { low: number; high: number } {
  if (n === 0) return { low: 0, high: 1 };
  const p = successes / n;
  const z2 = z * z;
  const centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const half = (z / (1 + z2 / n)) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  // At 0/n and n/n the bound is exactly 0 or 1; say so instead of 1 − 1e-16.
  return { low: successes === 0 ? 0 : Math.max(0, centre - half), high: successes === n ? 1 : Math.min(1, centre + half) };
}
