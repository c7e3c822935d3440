import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';

export const command = benchCommand({
  name: 'bench peer',
  usage: 'esopt bench peer [--model small|qwen3-0.6b-shape|DIR] [--batch 8] [--prompt-tokens 16] [--new-tokens 32] [--repeats 5] [--threads N] [--bandwidth-mib 512] [--json]',
  flags: stringFlags('model', 'batch', 'prompt-tokens', 'new-tokens', 'repeats', 'threads', 'bandwidth-mib'),
  load: () => import('../../../studies/bench/peer.ts'),
  indent: true,
  text: (out) =>
    `esopt ÷ transformers.js tokens/s ${out.ratio.toFixed(3)} (${out.esopt_tokens_per_s.toFixed(1)} vs ${out.transformers_js_tokens_per_s.toFixed(1)}, equal tokens in ${out.rows_with_equal_tokens}/${out.batch} rows); ` +
    `the memory-bandwidth limit ${out.limit_tokens_per_s.toFixed(0)} tok/s, esopt at ${(out.esopt_share_of_limit * 100).toFixed(1)} % of it`,
});
