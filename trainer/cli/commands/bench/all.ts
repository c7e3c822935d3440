import { benchCommand } from './bench-command.ts';
import type { FlagSpec } from '../../argv/args.ts';

const flags = { only: { type: 'string' }, scaling: { type: 'boolean' }, 'demo-report': { type: 'string' } } satisfies FlagSpec;

export const command = benchCommand({
  name: 'bench all',
  usage: 'esopt bench all [--only noise,full,...] [--scaling] [--demo-report FILE] [--json]',
  flags,
  load: () => import('../../../studies/bench/all.ts'),
  text: (summary) =>
    summary.benchmarks
      .map((o) => `${o.name}: ${o.error ? `FAILED (${o.error.split('\n')[0]})` : 'ok'} in ${o.seconds.toFixed(1)} s, load ${o.load.before.toFixed(1)}→${o.load.after.toFixed(1)}`)
      .join('\n'),
  exitCode: (summary) => (summary.benchmarks.every((o) => o.exitCode === 0) ? 0 : 1),
});
