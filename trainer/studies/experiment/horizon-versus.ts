/**
 * One method against itself in another horizon run with the same held-out tasks (e.g. ES on a subset of
 * weights against ES on all of them): per horizon, over the seeds both runs have, the difference clustered by
 * task (clustered-statistics.ts). Cells of the same (horizon, seed) must name the same tasks in the same order.
 */
import { clusteredDifference } from './clustered-statistics.ts';
import type { HorizonCell, Method } from './horizon-cell.ts';

export interface VersusRow {
  horizon: number;
  method: Method;
  /** The seeds both runs have for the method at this horizon. */
  seeds: number[];
  tasks: number;
  improvement: number;
  standardError: number;
}

export function versusRows(cells: readonly HorizonCell[], versus: readonly HorizonCell[], method: Method): VersusRow[] {
  const rows: VersusRow[] = [];
  for (const horizon of [...new Set(cells.map((c) => c.horizon))].sort((a, b) => a - b)) {
    const pairs = cells
      .filter((c) => c.horizon === horizon && c.solved[method])
      .sort((a, b) => a.seed - b.seed)
      .flatMap((c) => {
        const v = versus.find((x) => x.horizon === horizon && x.seed === c.seed && x.solved[method]);
        return v ? [[c, v] as const] : [];
      });
    if (!pairs.length) continue;
    for (const [c, v] of pairs) if (c.tasks.join() !== v.tasks.join()) throw new Error(`H = ${horizon}, seed ${c.seed}: the two runs were evaluated on different held-out tasks`);
    const d = clusteredDifference(pairs.map(([c]) => c.solved[method]!), pairs.map(([, v]) => v.solved[method]!));
    rows.push({ horizon, method, seeds: pairs.map(([c]) => c.seed), tasks: d.tasks, improvement: d.improvement, standardError: d.standardError });
  }
  return rows;
}

export function versusTable(rows: readonly VersusRow[], label: string): string {
  const pct = (x: number) => (x * 100).toFixed(1);
  return [
    `| H | seeds × tasks | ${label} (clustered by task, points) |`,
    '|---|---|---|',
    ...rows.map((r) => `| ${r.horizon} | ${r.seeds.length} × ${r.tasks} | ${r.improvement >= 0 ? '+' : '−'}${pct(Math.abs(r.improvement))} ± ${pct(r.standardError)} (${(r.improvement / r.standardError || 0).toFixed(2)} SE) |`),
  ].join('\n');
}
