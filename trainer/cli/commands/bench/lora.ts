import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';
import { modelFlags } from '../../argv/model-flags.ts';

const side = (name: string, f: { switch_ratio: number; switch_ms: number; episode_ms: number; tokens_ratio: number; tokens_per_s: number; rss_ratio: number | null; peak_rss_mib: number | null }) =>
  `${name}: switch ÷ episode ${f.switch_ratio.toFixed(4)} (${f.switch_ms.toFixed(1)} ÷ ${f.episode_ms.toFixed(0)} ms), tokens/s ÷ base ${f.tokens_ratio.toFixed(3)} (${f.tokens_per_s.toFixed(1)} tok/s), ` +
  (f.rss_ratio === null ? 'peak RSS not measured' : `peak RSS ÷ inference ${f.rss_ratio.toFixed(3)} (${f.peak_rss_mib!.toFixed(1)} MiB)`);

export const command = benchCommand({
  name: 'bench lora',
  usage: 'esopt bench lora [--model small|NAME|DIR] [--lora-rank 16] [--lora-alpha 32] [--targets all-linear|all|PATTERN] [--population 8] [--prompt-tokens 32] [--new-tokens 32] [--sigma 0.001] [--repeats 3] [--memory-iterations 2] [--threads N] [--provider cpu|cuda|webgpu] [--json]',
  flags: { ...modelFlags, ...stringFlags('lora-rank', 'lora-alpha', 'targets', 'population', 'prompt-tokens', 'new-tokens', 'sigma', 'repeats', 'memory-iterations', 'threads') },
  load: () => import('../../../studies/bench/lora.ts'),
  indent: true,
  text: (out) =>
    [
      `${out.model}: ${out.parameters} parameters; lora rank ${out.lora.rank} on ${out.lora.matrices} matrices = ${out.lora.adapter_parameters} adapter parameters; base ${out.base_tokens_per_s.toFixed(1)} tok/s`,
      side('full', out.full),
      side('lora', out.lora_mode),
    ].join('\n'),
});
