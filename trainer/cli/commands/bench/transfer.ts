import { benchCommand } from './bench-command.ts';
import { stringFlags } from '../../argv/args.ts';

const gb = (b: number) => `${(b / 1e9).toFixed(3)} GB`;

export const command = benchCommand({
  name: 'bench transfer',
  usage: 'esopt bench transfer [--model small|NAME|DIR] [--batch 32] [--context 1024] [--rank 1] [--measure-on webgpu|cpu|cuda|none] [--prompt 64] [--new-tokens 8] [--json]',
  flags: stringFlags('model', 'batch', 'context', 'rank', 'measure-on', 'prompt', 'new-tokens'),
  load: () => import('../../../studies/bench/transfer.ts'),
  indent: true,
  text: (out) =>
    [
      `per decode step, ${out.batch} rows at ${out.context} tokens (computed, CUDA provider without IO binding):`,
      `  θ as inputs (full mode, inputs)   host → device ${gb(out.theta_as_inputs_bytes)}`,
      `  KV caches as host outputs         ${gb(out.kv_cache_each_way_bytes)} each way (${out.kv_bytes_per_token_row} B per token and row)`,
      `  last-position logits              device → host ${gb(out.logits_bytes)}`,
      `  low-rank factors (rank ${out.rank})          host → device ${gb(out.lowrank_factor_bytes)}`,
      ...(out.measure_error ? [`not measured on ${out.measured_on}: ${out.measure_error}`] : []),
      ...(out.measured
        ? [
            `per decode step, measured on ${out.measured_on} (${out.batch} rows, ${out.measured_prompt}-token prompts, ${out.measured_new_tokens} new tokens):`,
            ...out.measured.flatMap((w) =>
              w.routes.flatMap((r) => [
                `  ${w.way.padEnd(12)} KV on the ${r.kv_on_device ? 'device' : 'host  '}  ${r.decode_step.total_bytes} B (${r.over_goal.toFixed(2)} × the goal, ${w.goal_bytes} B: logits + token ids)  in ${JSON.stringify(r.decode_step.host_to_device)} out ${JSON.stringify(r.decode_step.device_to_host)}`,
                `  ${''.padEnd(12)}   onnxruntime Memcpy nodes over the call (session profiling, ${r.memcpy_nodes.profiles} profiles): up ${r.memcpy_nodes.host_to_device_bytes} B in ${r.memcpy_nodes.host_to_device_runs} runs, down ${r.memcpy_nodes.device_to_host_bytes} B in ${r.memcpy_nodes.device_to_host_runs} runs` +
                  (r.gpu_buffer_moves ? `; device moves (counted at their runs): up ${r.gpu_buffer_moves.hostToDevice} B, down ${r.gpu_buffer_moves.deviceToHost} B in ${r.gpu_buffer_moves.runs} runs` : ''),
              ]),
            ),
          ]
        : []),
      ...(out.member_switch
        ? [
            `full mode's member switch, measured on ${out.measured_on} (bytes per switch; θ uploads apart):`,
            ...out.member_switch.map((r) => `  ${r.route.padEnd(12)} host → device ${r.host_to_device_per_switch} B, device → host ${r.device_to_host_per_switch} B over ${r.switches} switches (counted at the ${r.counted_at})${r.theta_uploads ? `; θ uploaded ${r.theta_uploads}× (${r.theta_upload_bytes} B)` : ''}; Memcpy nodes up ${r.memcpy_nodes.host_to_device_bytes} B, down ${r.memcpy_nodes.device_to_host_bytes} B (${r.memcpy_nodes.profiles} profiles)`),
          ]
        : []),
    ].join('\n'),
});
