/**
 * bf16 exports run widened to fp32: onnxruntime's CPU provider has no bf16 kernels and onnxruntime-node
 * has no bf16 tensor type to feed or read (so CUDA runs widened too). Widening is exact for the weights
 * (every bf16 value is an fp32 value), so θ's fp32 masters are what sessions read; the graph then computes
 * in fp32 on the bf16-rounded weights, which a framework computing in bf16 may not match bit for bit.
 */
import { AttributeType, DataType, type GraphProto, type ModelProto, type TensorProto } from '../onnx/proto.ts';
import { fromHalf } from '../onnx/half.ts';

/** Ops whose dtype attribute names an output type, which widening turns from BFLOAT16 into FLOAT. */
const DTYPE_ATTRIBUTES: Record<string, string> = {
  Cast: 'to', EyeLike: 'dtype', RandomNormal: 'dtype', RandomUniform: 'dtype', RandomNormalLike: 'dtype', RandomUniformLike: 'dtype', Multinomial: 'dtype', Bernoulli: 'dtype',
};
/** Attribute names that carry a dtype on ops widening does not know, refused when they name BFLOAT16. */
const UNKNOWN_DTYPE_NAMES = new Set(['to', 'dtype', 'output_dtype']);

/** A bf16 tensor (data inline as raw bytes) rewritten to fp32 in place; others are left as they are. */
function widenTensor(t: TensorProto): void {
  if (t.dataType !== DataType.BFLOAT16) return;
  const raw = t.rawData ?? new Uint8Array(0);
  const bits = raw.length ? (raw.byteOffset % 2 === 0 ? new Uint16Array(raw.buffer, raw.byteOffset, raw.length / 2) : new Uint16Array(raw.slice().buffer)) : Uint16Array.from(t.int32Data ?? []);
  const out = new Float32Array(bits.length);
  fromHalf(bits, out, 'bf16');
  t.rawData = new Uint8Array(out.buffer);
  t.int32Data = [];
  t.dataType = DataType.FLOAT;
}

function widenGraph(g: GraphProto, file: string): number {
  let widened = 0;
  for (const t of g.initializer) if (t.dataType === DataType.BFLOAT16) (widenTensor(t), widened++);
  for (const v of [...g.input, ...g.output, ...g.valueInfo]) {
    const tt = v.type?.tensorType;
    if (tt?.elemType === DataType.BFLOAT16) (tt.elemType = DataType.FLOAT, widened++);
  }
  for (const n of g.node) {
    for (const a of n.attribute) {
      if (a.t?.dataType === DataType.BFLOAT16) (widenTensor(a.t), widened++);
      if (a.g) widened += widenGraph(a.g, file);
      if (a.type !== AttributeType.INT || a.i !== DataType.BFLOAT16) continue;
      if (DTYPE_ATTRIBUTES[n.opType] === a.name && (n.domain ?? '') === '') (a.i = DataType.FLOAT, widened++);
      else if (UNKNOWN_DTYPE_NAMES.has(a.name)) {
        throw new Error(`${file}: node "${n.name ?? n.opType}" (${n.domain ? `${n.domain}.` : ''}${n.opType}) sets ${a.name} = BFLOAT16, which esopt cannot widen to float32 (it widens ${Object.entries(DTYPE_ATTRIBUTES).map(([op, name]) => `${op}.${name}`).join(', ')}); export the model in float16 or float32`);
      }
    }
  }
  return widened;
}

/**
 * Rewrites a bf16 export to fp32 in place — initializers, tensor attributes, graph IO and value_info,
 * `Cast(to=BFLOAT16)` and the other dtype attributes of ONNX ops — with initializer data already inline.
 * Returns how many tensors and attributes it changed (0 for a graph without bf16).
 */
export function widenBf16(model: ModelProto, file: string): number {
  return widenGraph(model.graph, file);
}
