import { cpus, loadavg, totalmem } from 'node:os';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { flag, parseFlags } from '../command/args.ts';
import type { Command, CommandIo } from '../command/command.ts';
import { benchmarks } from './index.ts';

/** One benchmark's outcome: its own --json output, parsed, or why it failed. */
interface BenchOutcome {
  name: string;
  exitCode: number;
  seconds: number;
  /** 1-minute load average when it started and when it ended: the machine may be shared. */
  load: { before: number; after: number };
  result: unknown;
  error: string | null;
}

function parseJsonOutput(text: string): unknown {
  const trimmed = text.trim();
  if (!trimmed) return null;
  try {
    return JSON.parse(trimmed);
  } catch {
    // A command printing one JSON document per line: keep them all.
    return trimmed.split('\n').map((line) => JSON.parse(line));
  }
}

export const command: Command = {
  name: 'bench all',
  usage: 'esopt bench all [--only noise,full,...] [--scaling] [--demo-report FILE] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { only: { type: 'string' }, scaling: { type: 'boolean' }, 'demo-report': { type: 'string' } });
    const only = flag(p.values, 'only', z.string().regex(/^[a-z-]+(,[a-z-]+)*$/, 'comma-separated benchmark names').optional())?.split(',');
    const demoReport = flag(p.values, 'demo-report', z.string().min(1).optional());
    const benches = benchmarks.filter((e) => !only || only.includes(e.name.slice('bench '.length)));
    // How cost scales: the same two benchmarks again with one knob turned (G, model size, episode length).
    const runs: Array<{ entry: (typeof benches)[number]; args: string[]; label: string }> = benches.map((entry) => ({ entry, args: [], label: entry.name }));
    if (p.values.scaling === true) {
      const byName = (n: string) => benchmarks.find((e) => e.name === n);
      const update = byName('bench update');
      const memory = byName('bench memory');
      const variants: Array<[typeof update, string[]]> = [
        [update, ['--model', 'tiny', '--population', '8', '--iterations', '1']],
        [update, ['--model', 'tiny', '--population', '32', '--iterations', '1']],
        [update, ['--model', 'tiny', '--population', '8', '--iterations', '1', '--max-tokens', '32']],
        [update, ['--model', 'small', '--population', '8', '--iterations', '1']],
        [memory, ['--model', 'tiny', '--population', '8', '--iterations', '1']],
        [memory, ['--model', 'tiny', '--population', '32', '--iterations', '1']],
        [memory, ['--model', 'small', '--population', '8', '--iterations', '1']],
      ];
      for (const [entry, args] of variants) if (entry) runs.push({ entry, args, label: `${entry.name} ${args.join(' ')}` });
    }
    const outcomes: BenchOutcome[] = [];
    for (const { entry, args, label } of runs) {
      if (!p.json) io.stderr(`running esopt ${label} …`);
      let out = '';
      let err = '';
      const captured: CommandIo = { stdout: (t) => void (out += `${t}\n`), stderr: (t) => void (err += `${t}\n`), readStdin: async () => '' };
      const before = loadavg()[0];
      const started = performance.now();
      let exitCode: number;
      let error: string | null = null;
      try {
        exitCode = await (await entry.load()).run([...args, '--json'], captured);
      } catch (e) {
        exitCode = 1;
        error = (e as Error).message;
      }
      let result: unknown = null;
      try {
        result = parseJsonOutput(out);
      } catch (e) {
        error ??= `output is not JSON: ${(e as Error).message}`;
      }
      if (exitCode !== 0) error ??= err.trim().slice(-2000) || `exit code ${exitCode}`;
      outcomes.push({ name: label, exitCode, seconds: (performance.now() - started) / 1000, load: { before, after: loadavg()[0] }, result, error });
    }
    const summary = {
      date: new Date().toISOString(),
      machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, memoryGiB: totalmem() / 2 ** 30, node: process.version, platform: `${process.platform}-${process.arch}` },
      benchmarks: outcomes,
      demo: demoReport ? JSON.parse(readFileSync(demoReport, 'utf8')) : null,
    };
    if (p.json) io.stdout(JSON.stringify(summary));
    else for (const o of outcomes) io.stdout(`${o.name}: ${o.error ? `FAILED (${o.error.split('\n')[0]})` : 'ok'} in ${o.seconds.toFixed(1)} s, load ${o.load.before.toFixed(1)}→${o.load.after.toFixed(1)}`);
    return outcomes.every((o) => o.exitCode === 0) ? 0 : 1;
  },
};
