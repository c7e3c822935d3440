/**
 * The horizon experiment's curves, one SVG per horizon (trainer/studies/charts/comparison-svg.ts): each trained
 * method's training success against training episodes, mean over the seeds that reached that point (ES's
 * perturbed members, GRPO's sampled rollouts, random search's best candidate so far), and the held-out
 * success of the base and of each method's final θ with Wilson 95% bars.
 */
import { renderComparison, TRAINED_METHODS, type TrainedMethod } from '../charts/comparison-svg.ts';
import type { HorizonCell } from './horizon-cell.ts';
import type { HorizonRow } from './horizon-summary.ts';

/** Mean over seeds of each method's training success at each episode count some seed reached. */
export function meanCurve(cells: readonly HorizonCell[], m: TrainedMethod): Array<[number, number]> {
  const at = new Map<number, number[]>();
  for (const c of cells) for (const p of c.curves[m] ?? []) at.set(p.episodes, [...(at.get(p.episodes) ?? []), p.successRate]);
  return [...at.entries()].sort((a, b) => a[0] - b[0]).map(([x, ys]) => [x, ys.reduce((s, y) => s + y, 0) / ys.length]);
}

export function renderHorizonCurves(row: HorizonRow, cells: readonly HorizonCell[]): string {
  const curves = Object.fromEntries(TRAINED_METHODS.map((m) => [m, meanCurve(cells, m)]));
  return renderComparison({
    title: `H = ${row.horizon}: success against training episodes`,
    xLabel: 'training episodes (per seed)',
    curves,
    heldOut: row.methods,
    budget: Math.max(1, ...Object.values(row.episodes).flat()),
  });
}
