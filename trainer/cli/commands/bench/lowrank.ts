import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';
import { modelFlags } from '../../argv/model-flags.ts';

export const command = benchCommand({
  name: 'bench lowrank',
  usage: 'esopt bench lowrank [--model small|NAME|DIR] [--batches 8,32] [--rank 1] [--prompt-tokens 16] [--new-tokens 48] [--repeats 9] [--threads N] [--provider cpu|cuda|webgpu] [--json]',
  flags: { ...modelFlags, ...stringFlags('threads', 'batches', 'rank', 'prompt-tokens', 'new-tokens', 'repeats') },
  load: () => import('../../../studies/bench/lowrank.ts'),
  indent: true,
  text: (out) => `low-rank ÷ base tokens/s: ${out.batches.map((r) => `B=${r.batch} ${r.ratio.toFixed(3)}`).join(', ')}; ratio (worst) ${out.ratio.toFixed(3)} (goal ≥ 0.95)`,
});
