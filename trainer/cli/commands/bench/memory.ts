import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';

export const command = benchCommand({
  name: 'bench memory',
  usage: 'esopt bench memory [--mode full|lowrank] [--model small|NAME|DIR] [--population 8] [--batch 4] [--prompt-tokens 32] [--new-tokens 32] [--iterations 3] [--switch-threads N] [--full-weights inputs|rebuild-session] [--vs generate|grpo [--grpo-state float64|float32] [--grpo-kl β]] [--json]',
  flags: stringFlags('model', 'mode', 'population', 'batch', 'prompt-tokens', 'new-tokens', 'iterations', 'switch-threads', 'full-weights', 'vs', 'grpo-state', 'grpo-kl'),
  rename: { 'full-weights': 'fullModeWeights' },
  load: () => import('../../../studies/bench/memory.ts'),
  indent: true,
  text: (out) =>
    'grpo_over_es' in out
      ? out.grpo_peak_rss_mib === null
        ? `peak RSS ES ${out.es_peak_rss_mib.toFixed(1)} MiB; GRPO not measured: ${out.grpo_error}`
        : `peak RSS GRPO (${out.grpoState} state${out.grpoKl > 0 ? `, KL β ${out.grpoKl}` : ''}) ${out.grpo_peak_rss_mib.toFixed(1)} MiB ÷ ES ${out.es_peak_rss_mib.toFixed(1)} MiB = ${out.grpo_over_es!.toFixed(2)}`
      : `peak RSS train ${out.train_peak_rss_mib.toFixed(1)} MiB ÷ generate ${out.generate_peak_rss_mib.toFixed(1)} MiB = ratio ${out.ratio.toFixed(3)} (goal ≤ 1.05)` +
        (out.fp16_theta?.fp16Elements ? `; fp16 θ: ${out.fp16_theta.fp16Elements} elements held as fp32 masters (${out.fp16_theta.masterMiB.toFixed(1)} MiB, in both children) beside ${out.fp16_theta.fp16MiB.toFixed(1)} MiB of fp16` : ''),
});
