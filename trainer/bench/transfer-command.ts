import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../argv/args.ts';

const gb = (b: number) => `${(b / 1e9).toFixed(3)} GB`;

export const command = benchCommand({
  name: 'bench transfer',
  usage: 'esopt bench transfer [--model small|NAME|DIR] [--batch 32] [--context 1024] [--rank 1] [--json]',
  flags: stringFlags('model', 'batch', 'context', 'rank'),
  load: () => import('./transfer.ts'),
  indent: true,
  text: (out) =>
    [
      `per decode step, ${out.batch} rows at ${out.context} tokens (computed, CUDA provider without IO binding):`,
      `  θ as inputs (full mode, inputs)   host → device ${gb(out.theta_as_inputs_bytes)}`,
      `  KV caches as host outputs         ${gb(out.kv_cache_each_way_bytes)} each way (${out.kv_bytes_per_token_row} B per token and row)`,
      `  last-position logits              device → host ${gb(out.logits_bytes)}`,
      `  low-rank factors (rank ${out.rank})          host → device ${gb(out.lowrank_factor_bytes)}`,
    ].join('\n'),
});
