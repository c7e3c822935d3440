/**
 * `esopt bench all`: every benchmark in trainer/studies/bench/index.ts (or those named) with its default options,
 * each result gathered with its time and the machine's load around it; `scaling` adds the cost-scaling
 * runs (the same two benchmarks with one knob turned: G, model size, episode length).
 */
import { readFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { z } from 'zod';
import type { Log } from './benchmark.ts';
import { benchmarks } from './index.ts';

export const options = z.object({
  only: z
    .string()
    .regex(/^[a-z-]+(,[a-z-]+)*$/, 'comma-separated benchmark names')
    .transform((s) => s.split(','))
    .optional(),
  scaling: z.boolean().default(false),
  demoReport: z.string().min(1).optional(),
});

/** One benchmark's outcome: its result (what its --json prints), or why it failed. */
interface BenchOutcome {
  name: string;
  exitCode: number;
  seconds: number;
  /** 1-minute load average when it started and when it ended: the machine may be shared. */
  load: { before: number; after: number };
  result: unknown;
  error: string | null;
}

type Options = Record<string, string | number>;

const SCALING: Array<[string, Options]> = [
  ['update', { model: 'tiny', population: 8, iterations: 1 }],
  ['update', { model: 'tiny', population: 32, iterations: 1 }],
  ['update', { model: 'tiny', population: 8, iterations: 1, maxTokens: 32 }],
  ['update', { model: 'small', population: 8, iterations: 1 }],
  ['memory', { model: 'tiny', population: 8, iterations: 1 }],
  ['memory', { model: 'tiny', population: 32, iterations: 1 }],
  ['memory', { model: 'small', population: 8, iterations: 1 }],
];

/** The command line a run stands for, as `bench all` has always named it. */
function label(name: string, o: Options): string {
  return [`bench ${name}`, ...Object.entries(o).map(([k, v]) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} ${v}`)].join(' ');
}

export async function run(o: z.output<typeof options>, log: Log) {
  const short = (name: string) => name.slice('bench '.length);
  const runs: Array<[string, Options]> = benchmarks.filter((b) => !o.only || o.only.includes(short(b.name))).map((b) => [short(b.name), {}]);
  if (o.scaling) runs.push(...SCALING);
  const outcomes: BenchOutcome[] = [];
  for (const [name, raw] of runs) {
    const title = label(name, raw);
    log(`running esopt ${title} …`);
    const before = loadavg()[0];
    const started = performance.now();
    let result: unknown = null;
    let error: string | null = null;
    try {
      const bench = await benchmarks.find((b) => b.name === `bench ${name}`)!.module();
      result = await bench.run(bench.options.parse(raw), () => {});
    } catch (e) {
      error = (e as Error).message;
    }
    outcomes.push({ name: title, exitCode: error === null ? 0 : 1, seconds: (performance.now() - started) / 1000, load: { before, after: loadavg()[0] }, result, error });
  }
  return {
    date: new Date().toISOString(),
    machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, memoryGiB: totalmem() / 2 ** 30, node: process.version, platform: `${process.platform}-${process.arch}` },
    benchmarks: outcomes,
    demo: o.demoReport ? JSON.parse(readFileSync(o.demoReport, 'utf8')) : null,
  };
}
