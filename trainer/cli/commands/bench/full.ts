import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';
import { modelFlags } from '../../argv/model-flags.ts';

export const command = benchCommand({
  name: 'bench full',
  usage: 'esopt bench full [--model small|NAME|DIR] [--batches 1,8] [--episode-tokens 256] [--prompt-tokens 64] [--new-tokens 64] [--sigma 0.001] [--cycles 1000] [--drift-model tiny|NAME|DIR] [--repeats 3] [--threads N] [--switch-threads N] [--provider cpu|cuda|webgpu] [--json]',
  flags: { ...modelFlags, ...stringFlags('threads', 'batches', 'episode-tokens', 'prompt-tokens', 'new-tokens', 'sigma', 'cycles', 'drift-model', 'repeats', 'switch-threads') },
  load: () => import('../../../studies/bench/full.ts'),
  indent: true,
  text: (out) =>
    [
      `switch_ratio ${out.switch_ratio.toFixed(3)} (switch ${out.switch_ms.toFixed(0)} ms, ${out.switch_cpu_ms.toFixed(0)} ms of CPU, ÷ episode ${out.episode_ms.toFixed(0)} ms; goal ≤ 0.05)`,
      `antithetic_switch_ratio ${out.antithetic_switch_ratio.toFixed(3)} (per member of a pair served back to back: ${out.antithetic_switch_ms.toFixed(0)} ms)`,
      `switch_ratio_threaded ${out.switch_ratio_threaded.toFixed(3)} (${out.switch_threads} threads: ${out.switch_ms_threaded.toFixed(0)} ms, ${out.switch_speedup.toFixed(2)}× faster; antithetic ${out.antithetic_switch_ratio_threaded.toFixed(3)})`,
      `drift ${out.drift} after ${out.drift_cycles} cycles (bound ${out.drift_bound.toExponential(2)}; plain subtraction ${out.drift_plain_subtraction.toExponential(2)})`,
      `input_vs_initializer ${out.input_vs_initializer.toFixed(3)} (goal ≥ 0.95)`,
      (out.rebuild_session_switch_ratio === null || out.rebuild_session_switch_ms === null
        ? `rebuild-session: θ is past an ORT-format model; `
        : `rebuild-session switch_ratio ${out.rebuild_session_switch_ratio.toFixed(3)} (θ in an ORT-format model: ${out.rebuild_session_switch_ms.toFixed(0)} ms ÷ episode ${out.rebuild_session_episode_ms.toFixed(0)} ms at initializer speed); `) +
        `by encoding the graph ${out.rebuild_session_encode_switch_ratio.toFixed(3)} (${out.rebuild_session_encode_switch_ms.toFixed(0)} ms)`,
    ].join('\n'),
});
