/**
 * The decode loop's context for a loaded model's graph, as the engine builds it (padded vocabulary rows
 * past the tokenizer never sampled), for benchmarks that drive sessions directly.
 */
import { headDim, kvHeads } from '../../engine/model/config.ts';
import type { LoadedModel } from '../../engine/model/model-dir.ts';
import { keepsKvOnDevice, type SessionSettings } from '../../engine/model/sessions.ts';
import { DeviceTensors } from '../../engine/generation/device-tensors.ts';
import { DataType } from '../../engine/onnx/proto.ts';

/** The dtype the graph's KV caches are fed in (fp16 exports keep them fp16). */
function kvTypeOf(model: LoadedModel): 'float32' | 'float16' {
  return model.graph.graph.input.find((i) => i.name === 'past_key_values.0.key')?.type?.tensorType?.elemType === DataType.FLOAT16 ? 'float16' : 'float32';
}

export function decodeContext(model: LoadedModel) {
  const c = model.config;
  const hasPositionIds = model.graph.graph.input.some((i) => i.name === 'position_ids');
  return {
    shape: { layers: c.num_hidden_layers, kvHeads: kvHeads(c), headDim: headDim(c), vocabSize: c.vocab_size, sampleable: Math.min(c.vocab_size, model.tokenizer.tokenCount), hasPositionIds, kvType: kvTypeOf(model) },
    tokenizer: model.tokenizer,
    eosIds: new Set<number>(),
    padId: c.pad_token_id ?? 0,
  };
}

/** The device tensors a benchmark's decode loop needs where its sessions keep the KV caches on a WebGPU device. */
export async function benchDevice(model: LoadedModel, settings: SessionSettings): Promise<DeviceTensors | undefined> {
  return keepsKvOnDevice(settings) ? DeviceTensors.create({ layers: model.config.num_hidden_layers, kvType: kvTypeOf(model) }) : undefined;
}
