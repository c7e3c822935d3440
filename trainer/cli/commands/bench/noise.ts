import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';

const f = (x: number | null) => (x === null ? 'n/a' : `${(x / 1e6).toFixed(1)} M/s`);
const r = (x: number | null) => (x === null ? 'n/a' : x.toFixed(2));

export const command = benchCommand({
  name: 'bench noise',
  usage: 'esopt bench noise [--log2-size 24] [--repeats 5] [--threads N] [--json]',
  flags: stringFlags('log2-size', 'repeats', 'threads'),
  load: () => import('../../../studies/bench/noise.ts'),
  indent: true,
  text: (out) =>
    [
      `noise regenerate+apply (${out.kernel} kernel): ${f(out.params_per_s)}  numpy: ${f(out.numpy_params_per_s)}  plain add: ${f(out.plain_add_params_per_s)}`,
      `ratio vs numpy ${r(out.ratio_vs_numpy)} (goal ≥ 2.0)   ratio vs add ${r(out.ratio_vs_add)} (goal ≥ 0.5)`,
      `esopt-device-noise on the host: kernel ${f(out.device_noise_params_per_s)} (${r(out.device_noise_ratio_vs_noise)} of esopt-noise's)  reference ${f(out.device_noise_reference_params_per_s)}  kernel ÷ reference ${r(out.device_noise_kernel_vs_reference)}`,
      `${out.threads} threads: ${f(out.params_per_s_threads)}  plain add ${f(out.plain_add_params_per_s_threads)}  ratio vs numpy ${r(out.ratio_vs_numpy_threads)}  vs add ${r(out.ratio_vs_add_threads)}`,
    ].join('\n'),
});
