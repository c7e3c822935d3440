import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';
import { modelFlags } from '../../argv/model-flags.ts';

export const command = benchCommand({
  name: 'bench prefix',
  usage: 'esopt bench prefix [--model small|NAME|DIR] [--mode lowrank|full] [--episode scripted|sudoku] [--turns 15] [--new-tokens 24] [--repeats 3] [--threads N] [--provider cpu|cuda|webgpu] [--json]',
  flags: { ...modelFlags, ...stringFlags('mode', 'episode', 'turns', 'new-tokens', 'repeats', 'threads') },
  load: () => import('../../../studies/bench/prefix.ts'),
  indent: true,
  text: (out) =>
    `${out.turns}-turn ${out.episode} episode, ${out.episode_tokens} tokens: prefilled ÷ episode tokens ${out.without_cache.prefilled_per_episode_token.toFixed(2)} → ${out.with_cache.prefilled_per_episode_token.toFixed(2)} with the prefix cache; wall ${out.without_cache.wall_ms.toFixed(0)} → ${out.with_cache.wall_ms.toFixed(0)} ms (ratio ${out.wall_ratio.toFixed(3)}); same replies: ${out.same_replies}`,
});
