/**
 * The horizon experiment's table from whatever cells exist: per horizon and method, held-out success over the
 * seeds that finished it with Wilson's 95% interval over the distinct tasks, and the per-seed rates; and the
 * differences (ES − base, GRPO − base, random search − base, ES − GRPO, ES − random search) clustered by task
 * over the seeds both methods have (clustered-statistics.ts: the seeds share their tasks).
 */
import { clusteredDifference, clusteredRate } from './clustered-statistics.ts';
import { METHODS, TRAINED, type HorizonCell, type Method } from './horizon-cell.ts';

export interface MethodSummary {
  /** Seeds that finished this method at this horizon. */
  seeds: number[];
  tasks: number;
  successes: number;
  successRate: number;
  low: number;
  high: number;
  perSeed: number[];
}

export interface Difference {
  /** Seeds both methods have, and the distinct tasks the standard error is taken over. */
  seeds: number;
  tasks: number;
  improvement: number;
  standardError: number;
}

export const DIFFERENCES = {
  esMinusBase: ['es', 'base'],
  grpoMinusBase: ['grpo', 'base'],
  randomSearchMinusBase: ['randomSearch', 'base'],
  esMinusGrpo: ['es', 'grpo'],
  esMinusRandomSearch: ['es', 'randomSearch'],
} as const satisfies Record<string, readonly [Method, Method]>;
export type DifferenceName = keyof typeof DIFFERENCES;

export interface HorizonRow {
  horizon: number;
  tasksPerSeed: number;
  methods: Partial<Record<Method, MethodSummary>>;
  differences: Partial<Record<DifferenceName, Difference>>;
  /** Training episodes per seed of each trained method (equal budgets by construction). */
  episodes: Partial<Record<Exclude<Method, 'base'>, number[]>>;
}

export interface HorizonSummary {
  cells: Array<{ horizon: number; seed: number; methods: Method[] }>;
  rows: HorizonRow[];
  table: string;
}

function summarizeMethod(at: readonly HorizonCell[], m: Method): MethodSummary | undefined {
  const have = at.filter((c) => c.solved[m]);
  if (!have.length) return undefined;
  const r = clusteredRate(have.map((c) => c.solved[m]!));
  return {
    seeds: have.map((c) => c.seed),
    tasks: r.tasks,
    successes: have.reduce((n, c) => n + c.solved[m]!.filter(Boolean).length, 0),
    successRate: r.rate,
    low: r.low,
    high: r.high,
    perSeed: have.map((c) => c.solved[m]!.filter(Boolean).length / c.solved[m]!.length),
  };
}

function difference(at: readonly HorizonCell[], a: Method, b: Method): Difference | undefined {
  const both = at.filter((c) => c.solved[a] && c.solved[b]);
  if (!both.length || both[0]!.tasks.length < 2) return undefined;
  return clusteredDifference(both.map((c) => c.solved[a]!), both.map((c) => c.solved[b]!));
}

const pct = (x: number) => (x * 100).toFixed(1);
const rate = (r: MethodSummary | undefined) => (r ? `${pct(r.successRate)} [${pct(r.low)}, ${pct(r.high)}] (${r.perSeed.map(pct).join(', ')})` : '—');
// a difference that rounds to zero prints +0.0, not −0.0 (a float a hair below zero)
const diff = (x: Difference | undefined) => (x ? `${pct(x.improvement) === '-0.0' || x.improvement >= 0 ? '+' : ''}${pct(x.improvement).replace(/^-0\.0$/, '0.0')} ± ${pct(x.standardError)}` : '—');

export function summarizeHorizon(cells: readonly HorizonCell[]): HorizonSummary {
  const horizons = [...new Set(cells.map((c) => c.horizon))].sort((a, b) => a - b);
  const rows = horizons.map((horizon): HorizonRow => {
    const at = cells.filter((c) => c.horizon === horizon).sort((a, b) => a.seed - b.seed);
    const tasksPerSeed = at[0].tasks.length;
    if (at.some((c) => c.tasks.join() !== at[0].tasks.join())) throw new Error(`H = ${horizon}: the cells were evaluated on different held-out tasks`);
    const methods: HorizonRow['methods'] = {};
    for (const m of METHODS) {
      const s = summarizeMethod(at, m);
      if (s) methods[m] = s;
    }
    const differences: HorizonRow['differences'] = {};
    for (const [name, [a, b]] of Object.entries(DIFFERENCES) as Array<[DifferenceName, readonly [Method, Method]]>) {
      const d = difference(at, a, b);
      if (d) differences[name] = d;
    }
    const episodes: HorizonRow['episodes'] = {};
    for (const m of TRAINED) {
      const e = at.flatMap((c) => (c.trainingEpisodes[m] === undefined ? [] : [c.trainingEpisodes[m]!]));
      if (e.length) episodes[m] = e;
    }
    return { horizon, tasksPerSeed, methods, differences, episodes };
  });
  const budget = (r: HorizonRow) => [...new Set(Object.values(r.episodes).flat())].join('/') || '—';
  const seedsOf = (r: HorizonRow) => Math.max(0, ...Object.values(r.methods).map((m) => m.seeds.length));
  const table = [
    '| H | seeds × tasks | episodes/method | base | ES | GRPO | random search | ES − base | GRPO − base | RS − base | ES − GRPO | ES − RS |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.horizon} | ${seedsOf(r)} × ${r.tasksPerSeed} | ${budget(r)} | ${rate(r.methods.base)} | ${rate(r.methods.es)} | ${rate(r.methods.grpo)} | ${rate(r.methods.randomSearch)} | ${diff(r.differences.esMinusBase)} | ${diff(r.differences.grpoMinusBase)} | ${diff(r.differences.randomSearchMinusBase)} | ${diff(r.differences.esMinusGrpo)} | ${diff(r.differences.esMinusRandomSearch)} |`,
    ),
  ].join('\n');
  return { cells: cells.map((c) => ({ horizon: c.horizon, seed: c.seed, methods: METHODS.filter((m) => c.solved[m]) })), rows, table };
}
