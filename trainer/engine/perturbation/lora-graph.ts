/**
 * LoRA mode's graph rewrite. Every MatMul y = x·W of an adapted matrix j becomes
 *
 *   h = Σₖ cₖ·(x·SAⱼₖᵀ)          (r wide: the row's x·(Aⱼ + c·εAⱼ)ᵀ)
 *   y = x·W + s·Σₖ cₖ·(h·SBⱼₖᵀ)   (the row's s·h·(Bⱼ + c·εBⱼ)ᵀ)
 *
 * over stacks of 1 + K slots per matrix: slot 0 holds θ's own Aⱼ (r × in) and Bⱼ (out × r), slot k ≥ 1 the
 * population's k-th noise vector's. s = α/r; per row, c₀ = 1, cₖ = sign·σ at the slot of the row's member's
 * noise index and 0 at every other (a base row: only c₀). That is exactly the row's member adapters
 * θ + sign·σ·ε, in one forward over shared inputs: nothing is fed per row but `lora.mask` (rows × (1 + K)), and
 * a batch of 8 members of an antithetic population reads 1 + 4 adapter-sized stacks per step, not 8 per-row
 * copies, none of it zero padding (lora-noise.ts fills the stacks).
 *
 * Inputs per matrix j: `lora.j.a` [(1+K)·r, in] (slot-major) and `lora.j.b` [out, (1+K)·r], both read transposed
 * by com.microsoft.FusedMatMul, so no run copies them into another layout. An fp16 export's x is cast to
 * fp32 for the adapter path and the correction cast back, so the adapters stay fp32.
 */
import { AttributeType, DataType, type AttributeProto, type ModelProto, type NodeProto } from '../onnx/proto.ts';
import { valueInfo } from '../onnx/graph-builder.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';
import type { LoraLayout } from '../../../shared/lora.ts';

/** The input names of adapted matrix j (slot j of the layout): its A and B stacks. */
export function loraInputs(j: number): { a: string; b: string } {
  return { a: `lora.${j}.a`, b: `lora.${j}.b` };
}

/** The per-row input: row b's c_k for each of the 1 + K stack slots, [rows, 1, 1 + K, 1]. */
export const LORA_MASK = 'lora.mask';

const int = (name: string, i: number): AttributeProto => ({ name, type: AttributeType.INT, i });

/**
 * Rewrites the MatMuls that read the layout's slots' weights (by name) as above. Each slot must be read by
 * at least one plain MatMul as x·W; a weight read by several MatMuls gives each its own adapter path over the
 * same inputs.
 */
export function loraRewrite(model: ModelProto, weights: readonly NamedTensor[], layout: LoraLayout, file = 'model.onnx'): ModelProto {
  const r = layout.rank;
  const slotOf = new Map(layout.slots.map((s, j) => [s.name, j]));
  const dims = new Map(weights.map((w) => [w.name, w.dims]));
  const initializerType = new Map(model.graph.initializer.map((t) => [t.name, t.dataType]));
  const inputType = new Map(model.graph.input.map((i) => [i.name, i.type?.tensorType?.elemType]));
  const seen = new Set<number>();
  const extra: Array<{ name: string; dims: number[]; dataType: number; raw: Uint8Array }> = [];
  const shape = (name: string, values: number[]) => {
    extra.push({ name, dims: [values.length], dataType: DataType.INT64, raw: new Uint8Array(BigInt64Array.from(values.map(BigInt)).buffer) });
    return name;
  };
  const splitRank = shape('/lora/shape_k_r', [0, 0, -1, r]);
  const joinRank = shape('/lora/shape_kr', [0, 0, -1]);
  const axis2 = shape('/lora/axis2', [2]);
  let count = 0;
  const node = model.graph.node.flatMap((n): NodeProto[] => {
    const j = n.opType === 'MatMul' && (n.domain ?? '') === '' ? slotOf.get(n.input[1]) : undefined;
    if (j === undefined) return [n];
    const slot = layout.slots[j];
    const d = dims.get(slot.name);
    if (!d || d.length !== 2 || d[0] !== slot.in || d[1] !== slot.out) throw new Error(`${file}: LoRA slot ${slot.name} is ${slot.in}×${slot.out}, the weight ${d ? d.join('×') : 'is missing'}`);
    seen.add(j);
    const io = loraInputs(j);
    const base = `/lora/${count++}`;
    const half = (initializerType.get(slot.name) ?? inputType.get(slot.name)) === DataType.FLOAT16;
    const v = (s: string) => `${base}/${s}`;
    const op = (name: string, opType: string, input: string[], attribute: AttributeProto[] = [], domain = ''): NodeProto => ({ name: v(name), opType, domain, input, output: [v(name)], attribute });
    const fused = (name: string, a: string, b: string, alpha = 1) => op(name, 'FusedMatMul', [a, b], [int('transB', 1), { name: 'alpha', type: AttributeType.FLOAT, f: alpha }], 'com.microsoft');
    const x = half ? v('x') : n.input[0];
    const dense = `${n.output[0]}/dense`;
    const nodes: NodeProto[] = [
      { ...n, output: [dense] },
      ...(half ? [op('x', 'Cast', [n.input[0]], [int('to', DataType.FLOAT)])] : []),
      fused('xs', x, io.a),
      op('xs4', 'Reshape', [v('xs'), splitRank]),
      op('xsm', 'Mul', [v('xs4'), LORA_MASK]),
      op('h', 'ReduceSum', [v('xsm'), axis2], [int('keepdims', 1)]),
      op('hm4', 'Mul', [v('h'), LORA_MASK]),
      op('hm', 'Reshape', [v('hm4'), joinRank]),
      fused('delta', v('hm'), io.b, layout.scale),
      ...(half ? [op('delta16', 'Cast', [v('delta')], [int('to', DataType.FLOAT16)])] : []),
      { name: `${base}/add`, opType: 'Add', domain: '', input: [dense, v(half ? 'delta16' : 'delta')], output: [n.output[0]], attribute: [] },
    ];
    return nodes;
  });
  const missing = layout.slots.filter((_, j) => !seen.has(j)).map((s) => s.name);
  if (missing.length > 0) throw new Error(`${file}: no MatMul reads ${missing.join(', ')} as x·W, so LoRA cannot attach adapters to it`);
  const inputs = layout.slots.flatMap((s, j) => {
    const io = loraInputs(j);
    return [
      valueInfo(io.a, DataType.FLOAT, ['lora_slots_rank', s.in]),
      valueInfo(io.b, DataType.FLOAT, [s.out, 'lora_slots_rank']),
    ];
  });
  const mask = valueInfo(LORA_MASK, DataType.FLOAT, ['batch_size', 1, 'lora_slots', 1]);
  const opsets = model.opsetImport.some((o) => o.domain === 'com.microsoft') ? model.opsetImport : [...model.opsetImport, { domain: 'com.microsoft', version: 1 }];
  return {
    ...model,
    opsetImport: opsets,
    graph: {
      ...model.graph,
      node,
      initializer: [...model.graph.initializer, ...extra.map((e) => ({ name: e.name, dims: e.dims, dataType: e.dataType, rawData: e.raw }))],
      input: [...model.graph.input, ...inputs, mask],
    },
  };
}
