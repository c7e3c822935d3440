/**
 * Emits a Llama-style decoder as an ONNX graph with the IO names of Hugging Face / optimum decoder exports:
 * input_ids, attention_mask, position_ids, past_key_values.{i}.key|value → logits, present.{i}.key|value.
 * Weights are initializers, exactly like an export; the perturbation modes rewrite built and loaded graphs
 * alike (trainer/perturbation/).
 */
import { headDim, kvHeads, type ModelConfig } from './config.ts';
import { GraphBuilder } from '../onnx/graph-builder.ts';
import { DataType, type ModelProto } from '../onnx/proto.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';

/** Additive attention bias for masked keys: large enough to zero a softmax term, small enough to stay finite. */
const MASKED = -1e9;

export function buildDecoder(c: ModelConfig, weights: readonly NamedTensor[]): ModelProto {
  const H = c.num_attention_heads;
  if (kvHeads(c) !== H) throw new Error('the builder emits multi-head attention only (num_key_value_heads must equal num_attention_heads)');
  const hd = headDim(c);
  if (hd % 2 !== 0) throw new Error(`head_dim must be even for rotary positions, got ${hd}`);
  const eps = c.rms_norm_eps ?? 1e-5;
  const theta = c.rope_theta ?? 10000;
  const g = new GraphBuilder();
  const byName = new Map(weights.map((w) => [w.name, w]));
  const W = (name: string): string => {
    const w = byName.get(name);
    if (!w) throw new Error(`weights: missing tensor "${name}"`);
    return g.floatTensor(name, w.data, w.dims);
  };

  const inputIds = g.input('input_ids', DataType.INT64, ['batch_size', 'sequence_length']);
  const attentionMask = g.input('attention_mask', DataType.INT64, ['batch_size', 'total_sequence_length']);
  const positionIds = g.input('position_ids', DataType.INT64, ['batch_size', 'sequence_length']);
  const past = Array.from({ length: c.num_hidden_layers }, (_, i) => ({
    key: g.input(`past_key_values.${i}.key`, DataType.FLOAT, ['batch_size', H, 'past_sequence_length', hd]),
    value: g.input(`past_key_values.${i}.value`, DataType.FLOAT, ['batch_size', H, 'past_sequence_length', hd]),
  }));

  // --- attention bias [B,1,S,T]: key j visible to query s iff j ≤ (T−S)+s and attention_mask[b,j] = 1 ---
  const zero = g.int64Const([0]);
  const one = g.int64Const([1]);
  const S = g.op1('Gather', [g.op1('Shape', [inputIds]), one], { axis: 0 });
  const T = g.op1('Gather', [g.op1('Shape', [attentionMask]), one], { axis: 0 });
  const P = g.op1('Sub', [T, S]);
  const scalar = (v: string) => g.op1('Squeeze', [v, zero]);
  const keyPos = g.op1('Unsqueeze', [g.op1('Range', [scalar(zero), scalar(T), scalar(one)]), zero]);
  const queryPos = g.op1('Unsqueeze', [g.op1('Range', [scalar(P), scalar(T), scalar(one)]), one]);
  const causal = g.op1('LessOrEqual', [keyPos, queryPos]);
  const padding = g.op1('Unsqueeze', [g.op1('Cast', [attentionMask], { to: DataType.BOOL }), g.int64Const([1, 2])]);
  const bias = g.op1('Where', [g.op1('And', [causal, padding]), g.floatScalar(0), g.floatScalar(MASKED)]);

  // --- rotary positions: onnxruntime's fused RotaryEmbedding kernel (com.microsoft) over [B,H,S,hd] ---
  const maxPos = c.max_position_embeddings;
  const cosCache = new Float32Array(maxPos * (hd / 2));
  const sinCache = new Float32Array(maxPos * (hd / 2));
  for (let pos = 0; pos < maxPos; pos++) {
    for (let i = 0; i < hd / 2; i++) {
      const angle = pos / theta ** ((2 * i) / hd);
      cosCache[pos * (hd / 2) + i] = Math.cos(angle);
      sinCache[pos * (hd / 2) + i] = Math.sin(angle);
    }
  }
  const cos = g.floatTensor('/rotary/cos_cache', cosCache, [maxPos, hd / 2]);
  const sin = g.floatTensor('/rotary/sin_cache', sinCache, [maxPos, hd / 2]);
  const rotary = (x: string) => g.op('RotaryEmbedding', [x, positionIds, cos, sin], { interleaved: 0 }, 1, 'com.microsoft')[0];
  const epsConst = g.floatScalar(eps);
  const two = g.floatScalar(2);
  // Written as Pow/ReduceMean/Add/Sqrt/Div/Mul, the pattern onnxruntime fuses into one
  // SimplifiedLayerNormalization kernel (Mul(x, x) in place of Pow would not be recognised).
  const rmsNorm = (x: string, weight: string) => {
    const meanSquare = g.op1('ReduceMean', [g.op1('Pow', [x, two])], { axes: [-1], keepdims: 1 });
    return g.op1('Mul', [g.op1('Div', [x, g.op1('Sqrt', [g.op1('Add', [meanSquare, epsConst])])]), W(weight)]);
  };
  const headsShape = g.int64Const([0, 0, H, hd]);
  const mergedShape = g.int64Const([0, 0, H * hd]);
  const toHeads = (x: string) => g.op1('Transpose', [g.op1('Reshape', [x, headsShape])], { perm: [0, 2, 1, 3] });
  const scale = g.floatScalar(1 / Math.sqrt(hd));

  let x = g.op1('Gather', [W('model.embed_tokens.weight'), inputIds], { axis: 0 });
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `model.layers.${i}`;
    const h = rmsNorm(x, `${p}.input_layernorm.weight`);
    const q = g.op1('Mul', [rotary(toHeads(g.op1('MatMul', [h, W(`${p}.self_attn.q_proj.weight`)]))), scale]);
    const k = rotary(toHeads(g.op1('MatMul', [h, W(`${p}.self_attn.k_proj.weight`)])));
    const v = toHeads(g.op1('MatMul', [h, W(`${p}.self_attn.v_proj.weight`)]));
    const keys = g.nameOutput(g.op1('Concat', [past[i].key, k], { axis: 2 }), `present.${i}.key`);
    const values = g.nameOutput(g.op1('Concat', [past[i].value, v], { axis: 2 }), `present.${i}.value`);
    const scores = g.op1('Add', [g.op1('MatMul', [q, g.op1('Transpose', [keys], { perm: [0, 1, 3, 2] })]), bias]);
    const context = g.op1('MatMul', [g.op1('Softmax', [scores], { axis: -1 }), values]);
    const merged = g.op1('Reshape', [g.op1('Transpose', [context], { perm: [0, 2, 1, 3] }), mergedShape]);
    x = g.op1('Add', [x, g.op1('MatMul', [merged, W(`${p}.self_attn.o_proj.weight`)])]);
    const h2 = rmsNorm(x, `${p}.post_attention_layernorm.weight`);
    const gate = g.op1('MatMul', [h2, W(`${p}.mlp.gate_proj.weight`)]);
    const up = g.op1('MatMul', [h2, W(`${p}.mlp.up_proj.weight`)]);
    const act = g.op1('Mul', [g.op1('Mul', [gate, g.op1('Sigmoid', [gate])]), up]);
    x = g.op1('Add', [x, g.op1('MatMul', [act, W(`${p}.mlp.down_proj.weight`)])]);
  }
  g.nameOutput(g.op1('MatMul', [rmsNorm(x, 'model.norm.weight'), W('lm_head.weight')]), 'logits');

  g.output('logits', DataType.FLOAT, ['batch_size', 'sequence_length', c.vocab_size]);
  for (let i = 0; i < c.num_hidden_layers; i++) {
    g.output(`present.${i}.key`, DataType.FLOAT, ['batch_size', H, 'total_sequence_length', hd]);
    g.output(`present.${i}.value`, DataType.FLOAT, ['batch_size', H, 'total_sequence_length', hd]);
  }
  return g.model('esopt-decoder');
}
