/**
 * Emits a decoder of the Llama family as an ONNX graph with the IO names of Hugging Face / optimum decoder
 * exports: input_ids, attention_mask, position_ids, past_key_values.{i}.key|value → logits,
 * present.{i}.key|value. Variants by config (config.ts `architecture`): grouped-query attention, tied head,
 * Llama 3 rope scaling, Qwen2 q/k/v biases, Qwen3 per-head q/k norms with head_dim apart from hidden/heads,
 * Gemma's scaled embeddings, (1 + w) norms and gelu MLP. Weights are initializers, exactly like an export;
 * the perturbation modes rewrite built and loaded graphs alike (trainer/engine/perturbation/).
 */
import { architecture, headDim, kvHeads, rotaryInverseFrequencies, type ModelConfig } from './config.ts';
import { GraphBuilder } from '../onnx/graph-builder.ts';
import { DataType, type ModelProto } from '../onnx/proto.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';

/** Additive attention bias for masked keys: large enough to zero a softmax term, small enough to stay finite. */
const MASKED = -1e9;

export function buildDecoder(c: ModelConfig, weights: readonly NamedTensor[]): ModelProto {
  const H = c.num_attention_heads;
  const KV = kvHeads(c);
  if (H % KV !== 0) throw new Error(`num_attention_heads ${H} must be a multiple of num_key_value_heads ${KV}`);
  const G = H / KV;
  const hd = headDim(c);
  if (hd % 2 !== 0) throw new Error(`head_dim must be even for rotary positions, got ${hd}`);
  const a = architecture(c);
  const eps = c.rms_norm_eps ?? (a.gemma ? 1e-6 : 1e-5);
  const g = new GraphBuilder();
  const byName = new Map(weights.map((w) => [w.name, w]));
  const placed = new Set<string>();
  // one initializer per weight, however many nodes read it (the tied embedding is read twice)
  const W = (name: string): string => {
    const w = byName.get(name);
    if (!w) throw new Error(`weights: missing tensor "${name}"`);
    if (!placed.has(name)) g.floatTensor(name, w.data, w.dims);
    placed.add(name);
    return name;
  };

  const inputIds = g.input('input_ids', DataType.INT64, ['batch_size', 'sequence_length']);
  const attentionMask = g.input('attention_mask', DataType.INT64, ['batch_size', 'total_sequence_length']);
  const positionIds = g.input('position_ids', DataType.INT64, ['batch_size', 'sequence_length']);
  const past = Array.from({ length: c.num_hidden_layers }, (_, i) => ({
    key: g.input(`past_key_values.${i}.key`, DataType.FLOAT, ['batch_size', KV, 'past_sequence_length', hd]),
    value: g.input(`past_key_values.${i}.value`, DataType.FLOAT, ['batch_size', KV, 'past_sequence_length', hd]),
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
  let bias = g.op1('Where', [g.op1('And', [causal, padding]), g.floatScalar(0), g.floatScalar(MASKED)]);
  // grouped-query attention scores are [B,KV,G,S,T]: the bias gains the group axis
  if (G > 1) bias = g.op1('Unsqueeze', [bias, one]);

  // --- rotary positions: onnxruntime's fused RotaryEmbedding kernel (com.microsoft) over [B,heads,S,hd] ---
  const maxPos = c.max_position_embeddings;
  const inv = rotaryInverseFrequencies(c);
  const cosCache = new Float32Array(maxPos * (hd / 2));
  const sinCache = new Float32Array(maxPos * (hd / 2));
  for (let pos = 0; pos < maxPos; pos++) {
    for (let i = 0; i < hd / 2; i++) {
      cosCache[pos * (hd / 2) + i] = Math.cos(pos * inv[i]);
      sinCache[pos * (hd / 2) + i] = Math.sin(pos * inv[i]);
    }
  }
  const cos = g.floatTensor('/rotary/cos_cache', cosCache, [maxPos, hd / 2]);
  const sin = g.floatTensor('/rotary/sin_cache', sinCache, [maxPos, hd / 2]);
  const rotary = (x: string) => g.op('RotaryEmbedding', [x, positionIds, cos, sin], { interleaved: 0 }, 1, 'com.microsoft')[0];
  const epsConst = g.floatScalar(eps);
  const two = g.floatScalar(2);
  const unit = g.floatScalar(1);
  // Written as Pow/ReduceMean/Add/Sqrt/Div/Mul, the pattern onnxruntime fuses into one
  // SimplifiedLayerNormalization kernel (Mul(x, x) in place of Pow would not be recognised).
  const rmsNorm = (x: string, weight: string) => {
    const meanSquare = g.op1('ReduceMean', [g.op1('Pow', [x, two])], { axes: [-1], keepdims: 1 });
    const scale = a.gemma ? g.op1('Add', [W(weight), unit]) : W(weight);
    return g.op1('Mul', [g.op1('Div', [x, g.op1('Sqrt', [g.op1('Add', [meanSquare, epsConst])])]), scale]);
  };
  const linear = (x: string, name: string, withBias: boolean) => {
    const y = g.op1('MatMul', [x, W(`${name}.weight`)]);
    return withBias ? g.op1('Add', [y, W(`${name}.bias`)]) : y;
  };
  const split = (heads: number) => g.int64Const([0, 0, heads, hd]);
  const mergedShape = g.int64Const([0, 0, H * hd]);
  const transpose = (x: string) => g.op1('Transpose', [x], { perm: [0, 2, 1, 3] });
  const scale = g.floatScalar(1 / Math.sqrt(hd));
  const groupedShape = g.int64Const([0, KV, G, -1, hd]);
  const headsShape = g.int64Const([0, H, -1, hd]);
  const gelu = (x: string) => {
    // transformers' gelu_pytorch_tanh: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    const inner = g.op1('Mul', [g.op1('Add', [x, g.op1('Mul', [g.op1('Pow', [x, g.floatScalar(3)]), g.floatScalar(0.044715)])]), g.floatScalar(Math.sqrt(2 / Math.PI))]);
    return g.op1('Mul', [g.op1('Mul', [x, g.floatScalar(0.5)]), g.op1('Add', [g.op1('Tanh', [inner]), unit])]);
  };

  let x = g.op1('Gather', [W('model.embed_tokens.weight'), inputIds], { axis: 0 });
  if (a.gemma) x = g.op1('Mul', [x, g.floatScalar(Math.sqrt(c.hidden_size))]);
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `model.layers.${i}`;
    const h = rmsNorm(x, `${p}.input_layernorm.weight`);
    let q = g.op1('Reshape', [linear(h, `${p}.self_attn.q_proj`, a.qkvBias), split(H)]);
    let k = g.op1('Reshape', [linear(h, `${p}.self_attn.k_proj`, a.qkvBias), split(KV)]);
    const v = transpose(g.op1('Reshape', [linear(h, `${p}.self_attn.v_proj`, a.qkvBias), split(KV)]));
    if (a.qkNorm) {
      q = rmsNorm(q, `${p}.self_attn.q_norm.weight`);
      k = rmsNorm(k, `${p}.self_attn.k_norm.weight`);
    }
    q = g.op1('Mul', [rotary(transpose(q)), scale]);
    k = rotary(transpose(k));
    const keys = g.nameOutput(g.op1('Concat', [past[i].key, k], { axis: 2 }), `present.${i}.key`);
    const values = g.nameOutput(g.op1('Concat', [past[i].value, v], { axis: 2 }), `present.${i}.value`);
    // grouped-query attention: q as [B,KV,G,S,hd] against keys/values [B,KV,1,T,hd], broadcast over the group
    const qs = G > 1 ? g.op1('Reshape', [q, groupedShape]) : q;
    const ks = G > 1 ? g.op1('Unsqueeze', [keys, g.int64Const([2])]) : keys;
    const vs = G > 1 ? g.op1('Unsqueeze', [values, g.int64Const([2])]) : values;
    const scores = g.op1('Add', [g.op1('MatMul', [qs, g.op1('Transpose', [ks], { perm: G > 1 ? [0, 1, 2, 4, 3] : [0, 1, 3, 2] })]), bias]);
    let context = g.op1('MatMul', [g.op1('Softmax', [scores], { axis: -1 }), vs]);
    if (G > 1) context = g.op1('Reshape', [context, headsShape]);
    const merged = g.op1('Reshape', [transpose(context), mergedShape]);
    x = g.op1('Add', [x, linear(merged, `${p}.self_attn.o_proj`, a.oBias)]);
    const h2 = rmsNorm(x, `${p}.post_attention_layernorm.weight`);
    const gate = g.op1('MatMul', [h2, W(`${p}.mlp.gate_proj.weight`)]);
    const up = g.op1('MatMul', [h2, W(`${p}.mlp.up_proj.weight`)]);
    const act = g.op1('Mul', [a.gemma ? gelu(gate) : g.op1('Mul', [gate, g.op1('Sigmoid', [gate])]), up]);
    x = g.op1('Add', [x, g.op1('MatMul', [act, W(`${p}.mlp.down_proj.weight`)])]);
  }
  const final = rmsNorm(x, 'model.norm.weight');
  // A tied head reads the embedding table [V, D] itself, transposed inside the kernel (no copy of it per run).
  const logits = a.tied
    ? g.op('FusedMatMul', [final, W('model.embed_tokens.weight')], { transB: 1, alpha: { float: 1 } }, 1, 'com.microsoft')[0]
    : g.op1('MatMul', [final, W('lm_head.weight')]);
  g.nameOutput(logits, 'logits');

  g.output('logits', DataType.FLOAT, ['batch_size', 'sequence_length', c.vocab_size]);
  for (let i = 0; i < c.num_hidden_layers; i++) {
    g.output(`present.${i}.key`, DataType.FLOAT, ['batch_size', KV, 'total_sequence_length', hd]);
    g.output(`present.${i}.value`, DataType.FLOAT, ['batch_size', KV, 'total_sequence_length', hd]);
  }
  return g.model('esopt-decoder');
}
