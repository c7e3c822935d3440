/**
 * `esopt bench transfer`: what moves between host and device per decode step. MEASURED on a provider
 * (`--measure-on`, default webgpu; transfer-measured.ts): the bytes of the host tensors each step feeds and
 * fetches, with the KV caches on the device and on the host, at `batch` rows of `prompt` tokens. And
 * COMPUTED for the CUDA execution provider at a model's shape from its graph, at `context` tokens: θ fed as graph inputs (full mode,
 * `inputs`), the KV caches that go out as host outputs and come back as the next step's inputs, the
 * last-position logits, and low-rank mode's per-row factor inputs (from the real rewrite's feeds). onnxruntime
 * copies every host input to the device and every output back on each `run()` unless IO binding keeps
 * them there, which onnxruntime-node offers only for WebGPU buffers (docs/MODEL.md, GPU).
 */
import { z } from 'zod';
import { buildDecoder } from '../../engine/model/build-decoder.ts';
import { headDim, kvHeads, type ModelConfig } from '../../engine/model/config.ts';
import { loadModelDir } from '../../engine/model/model-dir.ts';
import { modelSpecFlag, PRESETS, type PresetName } from '../../engine/model/presets.ts';
import { decoderTensorSpecs } from '../../engine/model/weights.ts';
import { DataType, type ModelProto } from '../../engine/onnx/proto.ts';
import type { NamedTensor } from '../../engine/onnx/named-tensor.ts';
import { zeroFactorFeeds } from '../../engine/perturbation/lowrank-factors.ts';
import { lowRankRewrite } from '../../engine/perturbation/lowrank-graph.ts';
import type { Log } from './benchmark.ts';
import { int, ModelName } from './options.ts';
import { ExecutionProvider } from '../../../shared/execution-provider.ts';
import { measureMemberSwitches, measureTransfers, type MeasuredWay, type MemberSwitchRoute } from './transfer-measured.ts';
import { machineInfo } from './measure.ts';

export interface TransferShape {
  config: ModelConfig;
  graph: ModelProto;
  /** θ's tensors (their dims and names; the data is not read). */
  weights: readonly NamedTensor[];
}

export interface StepTransfers {
  /** Full mode with θ as inputs: all of θ, host → device, every step. */
  theta_as_inputs_bytes: number;
  /** `present.*` device → host, and the same bytes host → device as `past_key_values.*`, at `context` tokens. */
  kv_cache_each_way_bytes: number;
  /** KV bytes per token of one row (keys and values of every layer). */
  kv_bytes_per_token_row: number;
  /** The last position's logits, device → host. */
  logits_bytes: number;
  /** Low-rank mode's factor inputs for `batch` rows at `rank`, host → device. */
  lowrank_factor_bytes: number;
}

const bytesOfType = (t: number | undefined) => (t === DataType.FLOAT16 || t === DataType.BFLOAT16 ? 2 : 4);

/** Bytes per decode step of `batch` rows at `context` tokens, from the model's graph and config. */
export function stepTransfers(m: TransferShape, batch: number, context: number, rank: number): StepTransfers {
  const c = m.config;
  const g = m.graph.graph;
  const initializerType = new Map(g.initializer.map((t) => [t.name, t.dataType]));
  const theta = m.weights.reduce((a, w) => a + w.dims.reduce((x, y) => x * y, 1) * bytesOfType(initializerType.get(w.name)), 0);
  const kvType = g.input.find((i) => i.name === 'past_key_values.0.key')?.type?.tensorType?.elemType;
  const logitsType = g.output.find((o) => o.name === 'logits')?.type?.tensorType?.elemType;
  const kvPerToken = 2 * c.num_hidden_layers * kvHeads(c) * headDim(c) * bytesOfType(kvType);
  const { targets, groups } = lowRankRewrite(m.graph, m.weights);
  // one row's factors at rank 1; every factor input is linear in the batch and in the rank
  const oneRow = Object.values(zeroFactorFeeds(targets, groups, 1)).reduce((a, t) => a + (t.data as Float32Array).byteLength, 0);
  return {
    theta_as_inputs_bytes: theta,
    kv_cache_each_way_bytes: batch * context * kvPerToken,
    kv_bytes_per_token_row: kvPerToken,
    logits_bytes: batch * c.vocab_size * bytesOfType(logitsType),
    lowrank_factor_bytes: oneRow * batch * rank,
  };
}

/** A preset's shape without its weights (the graph around empty tensors), or an export directory loaded. */
export function transferShape(name: string): TransferShape {
  if (!(name in PRESETS)) return loadModelDir(name);
  const config = PRESETS[name as PresetName];
  const weights = decoderTensorSpecs(config).map((s) => ({ name: s.name, dims: s.dims, data: new Float32Array(0) }));
  return { config, graph: buildDecoder(config, weights), weights };
}

export const options = z.object({
  model: ModelName('small'),
  batch: int(1, 4096).default(32),
  context: int(1, 1 << 20).default(1024),
  rank: int(1, 64).default(1),
  /** Where to measure: a provider, or none (the computed figures only). */
  measureOn: z.union([ExecutionProvider, z.literal('none')]).default('webgpu'),
  prompt: int(1, 1 << 16).default(64),
  newTokens: int(2, 4096).default(8),
});

export async function run(o: z.output<typeof options>, log: Log) {
  log(`${o.model}: bytes per decode step of ${o.batch} rows at ${o.context} tokens of context (computed from the graph)`);
  const computed = { model: o.model, batch: o.batch, context: o.context, rank: o.rank, computed: true, ...stepTransfers(transferShape(o.model), o.batch, o.context, o.rank) };
  let measured: MeasuredWay[] | null = null;
  let memberSwitch: MemberSwitchRoute[] | null = null;
  // where Dawn finds no adapter (CI), the computed figures stand alone and the result says why
  let measureError: string | null = null;
  if (o.measureOn !== 'none') {
    log(`${o.model} on ${o.measureOn}: measuring ${o.batch} rows of ${o.prompt} prompt tokens + ${o.newTokens} new, KV caches on the device and on the host, low-rank and full mode (θ as inputs)`);
    try {
      measured = await measureTransfers({ model: modelSpecFlag(o.model, 0), provider: o.measureOn, batch: o.batch, prompt: o.prompt, newTokens: o.newTokens, rank: o.rank });
      log(`${o.model} on ${o.measureOn}: full mode's member switch, host route (esopt-noise) and device route (esopt-device-noise)`);
      memberSwitch = await measureMemberSwitches({ model: modelSpecFlag(o.model, 0), provider: o.measureOn, batch: o.batch, prompt: o.prompt, newTokens: o.newTokens });
    } catch (err) {
      if (!/Failed to get a WebGPU adapter|No supported adapters/.test((err as Error).message)) throw err;
      measureError = (err as Error).message;
      log(`not measured: ${measureError}`);
    }
  }
  return { ...computed, measured_on: o.measureOn, measured_prompt: o.prompt, measured_new_tokens: o.newTokens, measured, member_switch: memberSwitch, measure_error: measureError, machine: machineInfo() };
}
