/**
 * `node --import tsx scripts/startup-cost.ts [--repeats 7] [ROOT ...]`: the CPU time (user + sys) and wall
 * time a fresh process pays to start an episode worker of the local pool (trainer/fanout/local-worker.ts on
 * an fs store, which exits once ready when it has no IPC channel) and to run `esopt --help`,
 * `esopt train --help` and `esopt api --help` (each loads its command's module graph). Each ROOT (default:
 * this checkout) is a checkout of the project; with two, runs alternate between them so both see the same
 * load, and `cpu_ratio` per target is the median over the repeats of the second's CPU time ÷ the first's
 * in the same repeat. Prints the medians, with the 1-minute load before and after, as JSON. Linux only
 * (/usr/bin/time).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';

const TIME = '/usr/bin/time';

const TARGETS: Record<string, { args: string[]; env?: Record<string, string> }> = {
  'episode worker': { args: ['--import', 'tsx', 'trainer/fanout/local-worker.ts'] },
  'esopt --help': { args: ['trainer/cli/bin.js', '--help'] },
  'esopt train --help': { args: ['trainer/cli/bin.js', 'train', '--help'] },
  'esopt api --help': { args: ['trainer/cli/bin.js', 'api', '--help'] },
};

const { values, positionals } = parseArgs({ options: { repeats: { type: 'string' } }, allowPositionals: true });
const repeats = z.coerce.number().int().min(1).max(100).default(7).parse(values.repeats);
const roots = (positionals.length ? positionals : ['.']).map((r) => resolve(r));
for (const root of roots) if (!existsSync(join(root, 'trainer/fanout/local-worker.ts'))) throw new Error(`${root} is not an esopt checkout`);
if (!existsSync(TIME)) throw new Error(`${TIME} (GNU time) is needed to read a child's CPU time`);

const scratch = mkdtempSync(join(tmpdir(), 'esopt-startup-'));
const timeFile = join(scratch, 'time');

/** One run: seconds of wall, user and sys time, from GNU time. */
function once(root: string, target: string): { wall: number; cpu: number } {
  const env = { ...process.env, ESOPT_WORKER_STORE: JSON.stringify({ kind: 'fs', root: join(scratch, 'store') }) };
  const run = spawnSync(TIME, ['-f', '%e %U %S', '-o', timeFile, process.execPath, ...TARGETS[target].args], { cwd: root, env, stdio: ['ignore', 'ignore', 'pipe'] });
  if (run.status !== 0) throw new Error(`${target} in ${root} exited ${run.status}: ${run.stderr.toString().slice(-2000)}`);
  const [wall, user, sys] = readFileSync(timeFile, 'utf8').trim().split('\n').at(-1)!.split(' ').map(Number);
  return { wall, cpu: Math.round((user + sys) * 100) / 100 };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const loadBefore = loadavg()[0];
const samples = new Map<string, { wall: number[]; cpu: number[] }>();
// One unrecorded run of each fills tsx's transform cache, which every later run reads.
for (const root of roots) for (const target of Object.keys(TARGETS)) once(root, target);
for (let r = 0; r < repeats; r++) {
  for (const target of Object.keys(TARGETS)) {
    for (const root of roots) {
      const { wall, cpu } = once(root, target);
      const key = `${root}\t${target}`;
      const s = samples.get(key) ?? { wall: [], cpu: [] };
      s.wall.push(wall);
      s.cpu.push(cpu);
      samples.set(key, s);
    }
  }
}
rmSync(scratch, { recursive: true, force: true });

const rows = [...samples].map(([key, s]) => {
  const [root, target] = key.split('\t');
  return { root, target, cpu_s: median(s.cpu), wall_s: median(s.wall), cpu_runs_s: s.cpu, wall_runs_s: s.wall };
});
const cpuRatio = roots.length !== 2 ? undefined : Object.fromEntries(Object.keys(TARGETS).map((target) => {
  const [a, b] = roots.map((root) => samples.get(`${root}\t${target}`)!.cpu);
  return [target, Math.round(median(b.map((x, i) => x / a[i])) * 1000) / 1000];
}));
console.log(JSON.stringify({ repeats, load_1min_before: loadBefore, load_1min_after: loadavg()[0], cpu_ratio: cpuRatio, rows }, null, 2));
