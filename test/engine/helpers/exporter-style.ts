/**
 * Built graphs rewritten into the layouts PyTorch's ONNX exporter (optimum decoder-with-past) writes, for
 * the loader's tests: a tied head folded into a second initializer, and half-precision weights and IO.
 */
import { DataType, type GraphProto, type ModelProto, type NodeProto, type TensorProto } from '../../../trainer/engine/onnx/proto.ts';
import { bf16Bits, fp16Bits } from '../../../trainer/engine/onnx/half.ts';

export type TiedStyle = 'transposed-initializer' | 'transpose-node' | 'duplicate';

/**
 * A built tied graph (head `FusedMatMul(x, E, transB = 1)`) as the exporter writes it: `MatMul(x, Eᵀ)` with
 * Eᵀ a constant-folded initializer (`onnx::MatMul_…`), `MatMul(x, Transpose(E))`, or `MatMul(x,
 * Transpose(lm_head.weight))` with a copy of E.
 */
export function foldTiedHead(model: ModelProto, style: TiedStyle): ModelProto {
  const g = model.graph;
  const head = g.node.find((n) => n.opType === 'FusedMatMul' && n.output[0] === 'logits');
  if (!head) throw new Error('not a built tied graph');
  const E = g.initializer.find((t) => t.name === head.input[1])!;
  const [V, D] = E.dims;
  const e = new Float32Array((E.rawData as Uint8Array).slice().buffer);
  const plain = (b: string): NodeProto => ({ name: '/lm_head/MatMul', opType: 'MatMul', domain: '', input: [head.input[0], b], output: ['logits'], attribute: [] });
  const transpose = (x: string): NodeProto => ({ name: '/lm_head/Transpose', opType: 'Transpose', domain: '', input: [x], output: ['/lm_head/Transpose_output_0'], attribute: [{ name: 'perm', type: 7, ints: [1, 0] }] });
  const at = g.node.indexOf(head);
  if (style === 'transposed-initializer') {
    const t = new Float32Array(V * D);
    for (let v = 0; v < V; v++) for (let d = 0; d < D; d++) t[d * V + v] = e[v * D + d];
    g.initializer.push({ name: 'onnx::MatMul_4321', dims: [D, V], dataType: DataType.FLOAT, rawData: new Uint8Array(t.buffer) });
    g.node.splice(at, 1, plain('onnx::MatMul_4321'));
  } else {
    const source = style === 'duplicate' ? 'lm_head.weight' : E.name;
    if (style === 'duplicate') g.initializer.push({ name: 'lm_head.weight', dims: [V, D], dataType: DataType.FLOAT, rawData: new Uint8Array(e.slice().buffer) });
    g.node.splice(at, 1, transpose(source), plain('/lm_head/Transpose_output_0'));
  }
  return model;
}

/** Clamp to fp16's finite range first (a -1e9 mask bias becomes -65504, as finfo(float16).min in exports). */
function halfBits(v: number, kind: 'fp16' | 'bf16'): number {
  return kind === 'fp16' ? fp16Bits(Math.max(-65504, Math.min(65504, v))) : bf16Bits(v);
}

/** The graph with every float initializer and float IO tensor in half precision (an fp16/bf16 export). */
export function toHalfExport(model: ModelProto, kind: 'fp16' | 'bf16'): ModelProto {
  const type = kind === 'fp16' ? DataType.FLOAT16 : DataType.BFLOAT16;
  const convert = (t: TensorProto) => {
    if (t.dataType !== DataType.FLOAT) return;
    const raw = t.rawData as Uint8Array;
    const f = new Float32Array(raw.slice().buffer);
    const h = Uint16Array.from(f, (v) => halfBits(v, kind));
    t.rawData = new Uint8Array(h.buffer);
    t.dataType = type;
  };
  model.graph.initializer.forEach(convert);
  for (const v of [...model.graph.input, ...model.graph.output]) {
    const tt = v.type?.tensorType;
    if (tt && tt.elemType === DataType.FLOAT) tt.elemType = type;
  }
  return model;
}

/**
 * A built graph as optimum's merged decoder: one `If` on the input `use_cache_branch` whose then_branch is
 * the decoder (reading past_key_values) and whose else_branch is a copy of it (standing in for the
 * no-past decoder), weights as top-level initializers, branch outputs under names of their own.
 */
export function toMergedDecoder(model: ModelProto): ModelProto {
  const g = model.graph;
  const outs = g.output.map((o) => o.name);
  const branch = (tag: string): GraphProto => {
    const rename = (n: string) => (outs.includes(n) ? `${tag}/${n}` : n);
    return {
      name: tag,
      node: g.node.map((n) => ({ ...n, name: `${tag}/${n.name}`, input: n.input.map(rename), output: n.output.map(rename) })),
      initializer: [],
      input: [],
      output: g.output.map((o) => ({ ...o, name: rename(o.name) })),
      valueInfo: [],
    };
  };
  const ifNode: NodeProto = {
    name: 'optimum::if', opType: 'If', domain: '', input: ['use_cache_branch'], output: outs,
    attribute: [{ name: 'then_branch', type: 5, g: branch('with_past') }, { name: 'else_branch', type: 5, g: branch('no_past') }],
  };
  g.node = [ifNode];
  g.input.push({ name: 'use_cache_branch', type: { tensorType: { elemType: DataType.BOOL, shape: { dim: [{ dimValue: 1 }] } } } });
  return model;
}
