import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';
import { modelFlags } from '../../argv/model-flags.ts';

export const command = benchCommand({
  name: 'bench server',
  usage: 'esopt bench server [--model tiny|small|DIR] [--concurrency 32] [--max-tokens 32] [--repeats 3] [--window-ms 20] [--max-wait-ms 200] [--provider cpu|cuda|webgpu] [--record FILE --instance-type T] [--json]',
  flags: { ...modelFlags, ...stringFlags('concurrency', 'max-tokens', 'repeats', 'window-ms', 'max-wait-ms', 'record', 'instance-type') },
  load: () => import('../../../studies/bench/server.ts'),
  text: (out) =>
    `server ${out.server_tokens_per_s.toFixed(1)} tok/s ÷ offline ${out.offline_tokens_per_s.toFixed(1)} tok/s = ratio ${out.ratio.toFixed(3)} (goal ≥ 0.8; ${out.concurrency} concurrent, ${out.maxTokens} tokens each)`,
});
