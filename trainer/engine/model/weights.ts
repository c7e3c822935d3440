/**
 * The named tensors of a Llama-style decoder, in the canonical order that lays them out in ε's stream,
 * with a deterministic initialisation keyed by a seed (drawn from the shared noise generator, so the same
 * seed gives the same bits on every machine).
 */
import { fillNoise } from '../../../shared/noise.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';
import { architecture, headDim, kvHeads, type ModelConfig } from './config.ts';


/** Noise-key words reserved for initialisation: no ES iteration uses them. */
const INIT_ITERATION = 0xfffffff0;

export interface TensorSpec {
  name: string;
  dims: number[];
  init: 'normal' | 'ones' | 'zeros';
  std?: number;
}

export function decoderTensorSpecs(c: ModelConfig): TensorSpec[] {
  const d = c.hidden_size;
  const hd = headDim(c);
  const q = c.num_attention_heads * hd;
  const kv = kvHeads(c) * hd;
  const f = c.intermediate_size ?? 4 * d;
  const std = 0.02;
  const residualStd = std / Math.sqrt(2 * c.num_hidden_layers);
  const a = architecture(c);
  // Gemma's RMSNorm scales by (1 + w), so its identity scale is w = 0
  const norm = (name: string, size: number): TensorSpec => ({ name, dims: [size], init: a.gemma ? 'zeros' : 'ones' });
  const bias = (name: string, size: number): TensorSpec => ({ name, dims: [size], init: 'normal', std });
  const specs: TensorSpec[] = [{ name: 'model.embed_tokens.weight', dims: [c.vocab_size, d], init: 'normal', std }];
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `model.layers.${i}`;
    specs.push(norm(`${p}.input_layernorm.weight`, d), { name: `${p}.self_attn.q_proj.weight`, dims: [d, q], init: 'normal', std });
    if (a.qkvBias) specs.push(bias(`${p}.self_attn.q_proj.bias`, q));
    specs.push({ name: `${p}.self_attn.k_proj.weight`, dims: [d, kv], init: 'normal', std });
    if (a.qkvBias) specs.push(bias(`${p}.self_attn.k_proj.bias`, kv));
    specs.push({ name: `${p}.self_attn.v_proj.weight`, dims: [d, kv], init: 'normal', std });
    if (a.qkvBias) specs.push(bias(`${p}.self_attn.v_proj.bias`, kv));
    specs.push({ name: `${p}.self_attn.o_proj.weight`, dims: [q, d], init: 'normal', std: residualStd });
    if (a.oBias) specs.push(bias(`${p}.self_attn.o_proj.bias`, d));
    if (a.qkNorm) specs.push(norm(`${p}.self_attn.q_norm.weight`, hd), norm(`${p}.self_attn.k_norm.weight`, hd));
    specs.push(
      norm(`${p}.post_attention_layernorm.weight`, d),
      { name: `${p}.mlp.gate_proj.weight`, dims: [d, f], init: 'normal', std },
      { name: `${p}.mlp.up_proj.weight`, dims: [d, f], init: 'normal', std },
      { name: `${p}.mlp.down_proj.weight`, dims: [f, d], init: 'normal', std: residualStd },
    );
  }
  specs.push(norm('model.norm.weight', d));
  // a tied head reads the embedding table itself: one tensor, one entry of θ
  if (!a.tied) specs.push({ name: 'lm_head.weight', dims: [d, c.vocab_size], init: 'normal', std });
  return specs;
}

/** The decoder's tensors one at a time, in canonical order: a caller may write each out and drop it. */
export function* decoderTensors(c: ModelConfig, seed: number): Generator<NamedTensor> {
  let offset = 0;
  for (const s of decoderTensorSpecs(c)) {
    const size = s.dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(size);
    if (s.init === 'ones') data.fill(1);
    else if (s.init === 'normal') {
      fillNoise(data, { runSeed: seed >>> 0, iteration: INIT_ITERATION, member: 0 }, offset);
      const std = s.std ?? 0.02;
      for (let i = 0; i < size; i++) data[i] *= std;
    }
    offset += size;
    yield { name: s.name, dims: s.dims, data };
  }
}

export function initDecoderWeights(c: ModelConfig, seed: number): NamedTensor[] {
  return [...decoderTensors(c, seed)];
}

export function parameterCount(tensors: ReadonlyArray<{ data: Float32Array }>): number {
  return tensors.reduce((a, t) => a + t.data.length, 0);
}
