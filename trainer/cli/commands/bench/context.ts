import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';
import { modelFlags } from '../../argv/model-flags.ts';

export const command = benchCommand({
  name: 'bench context',
  usage: 'esopt bench context [--model small|NAME|DIR] [--contexts 64,128,…,4096] [--batch 1] [--new-tokens 16] [--repeats 3] [--warmup 1] [--threads N] [--provider cpu|cuda|webgpu] [--json]',
  flags: { ...modelFlags, ...stringFlags('threads', 'contexts', 'batch', 'new-tokens', 'repeats', 'warmup') },
  load: () => import('../../../studies/bench/context.ts'),
  indent: true,
  text: (out) =>
    out.points
      .map((p) => `context ${p.context}${p.tokens_equal ? '' : ' (tokens differ)'}: ${p.variants.map((v) => `${v.name} ${v.decode_ms_per_token.toFixed(2)} ms/token, prefill ${v.prefill_tokens_per_s.toFixed(0)} tokens/s`).join('; ')}`)
      .join('\n'),
});
