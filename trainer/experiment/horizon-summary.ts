/**
 * The horizon experiment's table from whatever cells exist: per horizon and method, held-out success pooled
 * over the seeds that finished it, with Wilson's 95% interval and the per-seed rates, and paired differences
 * (ES − base, GRPO − base, random search − base, ES − GRPO, ES − random search) over the (seed, task) pairs
 * both methods have, with their paired standard errors (trainer/demo/paired-difference.ts).
 */
import { wilsonInterval } from '../../shared/wilson.ts';
import { pairedDifference } from '../demo/paired-difference.ts';
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
  /** Paired (seed, task) results both methods have. */
  pairs: number;
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
  const all = have.flatMap((c) => c.solved[m]!);
  const successes = all.filter(Boolean).length;
  const ci = wilsonInterval(successes, all.length);
  return {
    seeds: have.map((c) => c.seed),
    tasks: all.length,
    successes,
    successRate: successes / all.length,
    low: ci.low,
    high: ci.high,
    perSeed: have.map((c) => c.solved[m]!.filter(Boolean).length / c.solved[m]!.length),
  };
}

function difference(at: readonly HorizonCell[], a: Method, b: Method): Difference | undefined {
  const both = at.filter((c) => c.solved[a] && c.solved[b]);
  const pairs = both.reduce((n, c) => n + c.tasks.length, 0);
  if (pairs < 2) return undefined;
  const p = pairedDifference(both.flatMap((c) => c.solved[b]!), both.flatMap((c) => c.solved[a]!));
  return { pairs, improvement: p.improvement, standardError: p.standardError };
}

const pct = (x: number) => (x * 100).toFixed(1);
const rate = (r: MethodSummary | undefined) => (r ? `${pct(r.successRate)} [${pct(r.low)}, ${pct(r.high)}] (${r.perSeed.map(pct).join(', ')})` : '—');
const diff = (x: Difference | undefined) => (x ? `${x.improvement >= 0 ? '+' : ''}${pct(x.improvement)} ± ${pct(x.standardError)}` : '—');

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
