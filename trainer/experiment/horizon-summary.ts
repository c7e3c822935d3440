/**
 * The horizon experiment's table: per horizon and method, held-out success pooled over seeds and tasks
 * with Wilson's 95% interval, and paired differences (method − base, ES − GRPO, ES − random search) over
 * the same (seed, task) pairs with their standard errors (trainer/demo/paired-difference.ts).
 */
import { wilsonInterval } from '../../shared/wilson.ts';
import { pairedDifference } from '../demo/paired-difference.ts';
import { METHODS, type HorizonCell, type Method } from './horizon.ts';

export interface HorizonRow {
  horizon: number;
  seeds: number[];
  tasksPerSeed: number;
  methods: Record<Method, { successRate: number; low: number; high: number; perSeed: number[] }>;
  differences: Record<'esMinusBase' | 'grpoMinusBase' | 'randomSearchMinusBase' | 'esMinusGrpo' | 'esMinusRandomSearch', { improvement: number; standardError: number }>;
  episodesPerMethod: number;
}

const pooled = (cells: readonly HorizonCell[], m: Method) => cells.flatMap((c) => c.solved[m]);

export function summarizeHorizon(cells: readonly HorizonCell[]): { rows: HorizonRow[]; table: string } {
  const horizons = [...new Set(cells.map((c) => c.horizon))].sort((a, b) => a - b);
  const rows = horizons.map((horizon): HorizonRow => {
    const at = cells.filter((c) => c.horizon === horizon);
    const methods = Object.fromEntries(
      METHODS.map((m) => {
        const s = pooled(at, m);
        const k = s.filter(Boolean).length;
        const ci = wilsonInterval(k, s.length);
        return [m, { successRate: k / s.length, low: ci.low, high: ci.high, perSeed: at.map((c) => c.solved[m].filter(Boolean).length / c.solved[m].length) }];
      }),
    ) as HorizonRow['methods'];
    const d = (a: Method, b: Method) => {
      const p = pairedDifference(pooled(at, b), pooled(at, a));
      return { improvement: p.improvement, standardError: p.standardError };
    };
    return {
      horizon,
      seeds: at.map((c) => c.seed),
      tasksPerSeed: at[0].tasks.length,
      methods,
      differences: { esMinusBase: d('es', 'base'), grpoMinusBase: d('grpo', 'base'), randomSearchMinusBase: d('randomSearch', 'base'), esMinusGrpo: d('es', 'grpo'), esMinusRandomSearch: d('es', 'randomSearch') },
      episodesPerMethod: at[0].trainingEpisodes.es,
    };
  });
  const pct = (x: number) => (x * 100).toFixed(1);
  const rate = (r: HorizonRow['methods'][Method]) => `${pct(r.successRate)} [${pct(r.low)}, ${pct(r.high)}]`;
  const diff = (x: { improvement: number; standardError: number }) => `${x.improvement >= 0 ? '+' : ''}${pct(x.improvement)} ± ${pct(x.standardError)}`;
  const table = [
    '| H | seeds × tasks | episodes/method | base | ES | GRPO | random search | ES − base | GRPO − base | ES − GRPO | ES − RS |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.horizon} | ${r.seeds.length} × ${r.tasksPerSeed} | ${r.episodesPerMethod} | ${rate(r.methods.base)} | ${rate(r.methods.es)} | ${rate(r.methods.grpo)} | ${rate(r.methods.randomSearch)} | ${diff(r.differences.esMinusBase)} | ${diff(r.differences.grpoMinusBase)} | ${diff(r.differences.esMinusGrpo)} | ${diff(r.differences.esMinusRandomSearch)} |`,
    ),
  ].join('\n');
  return { rows, table };
}
