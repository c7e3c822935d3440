import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';

export const command = benchCommand({
  name: 'bench fanout',
  usage: 'esopt bench fanout [--max-workers N] [--per-worker E] [--repeats R] [--episodes 1000] [--median-ms 2000] [--concurrency 64] [--per-invocation 1] [--poll-ms 100] [--json]',
  flags: stringFlags('max-workers', 'per-worker', 'repeats', 'episodes', 'median-ms', 'concurrency', 'per-invocation', 'poll-ms'),
  load: () => import('../../../studies/bench/fanout.ts'),
  text: (report) => {
    const overhead = report.overhead;
    return [
      ...report.scaling_points.map((q) => `${String(q.workers).padStart(3)} workers  ${q.episodes_per_s.toFixed(1).padStart(8)} episodes/s  scaling ${q.scaling.toFixed(3)}  dispatcher CPU ${q.dispatcher_cpu_share.toFixed(2)}  machine ${q.machine_scaling.toFixed(3)}`),
      `scaling at N=${report.scaling_workers}: ${report.scaling.toFixed(3)} (goal ≥ ${report.scaling_goal}); the machine's own, spinning threads: ${report.machine_scaling.toFixed(3)}`,
      `overhead_ratio: ${overhead.overhead_ratio.toFixed(4)} (goal ≤ ${report.overhead_goal}) — iteration ${overhead.iteration_ms} ms, episode span ${overhead.episode_span_ms} ms, ` +
        `before first episode ${overhead.before_first_episode_ms} ms, collect after last ${overhead.collect_after_last_episode_ms} ms, longest injected latency ${overhead.longest_injected_latency_ms} ms`,
      `trainer process CPU ÷ iteration wall time: ${overhead.trainer_cpu_share.toFixed(4)}`,
    ].join('\n');
  },
});
