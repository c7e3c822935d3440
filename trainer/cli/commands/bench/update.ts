import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';
import { modelFlags } from '../../argv/model-flags.ts';

export const command = benchCommand({
  name: 'bench update',
  usage: 'esopt bench update [--model small|tiny|DIR] [--population 32] [--iterations 2] [--workers 8] [--max-tokens 8] [--provider cpu|cuda|webgpu] [--json]',
  flags: { ...modelFlags, ...stringFlags('population', 'iterations', 'workers', 'max-tokens') },
  load: () => import('../../../studies/bench/update.ts'),
  text: (out) =>
    `overhead_ratio ${out.overhead_ratio.toFixed(4)} (goal ≤ 0.05): outside episodes ${(out.phases.total_ms - out.phases.episodes_ms).toFixed(0)} ms of ${out.phases.total_ms.toFixed(0)} ms over ${out.iterations} iteration(s), G = ${out.population} — ${JSON.stringify(out.phases)}`,
});
