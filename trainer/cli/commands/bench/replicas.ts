import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';

export const command = benchCommand({
  name: 'bench replicas',
  usage: 'esopt bench replicas [--model DIR|small|tiny] [--mode full|lowrank] [--episodes 48] [--concurrency 8] [--rounds 3] [--json]',
  flags: stringFlags('model', 'mode', 'episodes', 'concurrency', 'rounds'),
  load: () => import('../../../studies/bench/replicas.ts'),
  text: (result) =>
    [
      `episodes/s, 1 replica:  ${result.episodes_per_s_1.toFixed(2)}`,
      `episodes/s, 2 replicas: ${result.episodes_per_s_2.toFixed(2)}`,
      `scaling (2 ÷ 1): ${result.scaling.toFixed(3)}${result.pinned ? ' (each replica pinned to one core)' : ' (taskset unavailable: replicas not pinned)'}`,
      `cost per 1,000 such episodes (shared/cost.ts defaults): $${result.usd_per_1000_episodes_1.toFixed(4)} with 1 replica, $${result.usd_per_1000_episodes_2.toFixed(4)} with 2`,
    ].join('\n'),
});
