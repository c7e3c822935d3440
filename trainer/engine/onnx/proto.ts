/**
 * ONNX protobuf encode/decode through protobufjs, from the spec subset in onnx.proto (parsed at load; no
 * generated code). The interfaces below describe the decoded plain objects (int64 as number, bytes as
 * Uint8Array, repeated fields always arrays).
 */
import { readFileSync } from 'node:fs';
import protobuf from 'protobufjs';

export const DataType = { FLOAT: 1, UINT8: 2, INT8: 3, INT32: 6, INT64: 7, BOOL: 9, FLOAT16: 10, DOUBLE: 11, UINT32: 12, BFLOAT16: 16 } as const;
export const DataTypeName: Record<number, string> = {
  0: 'UNDEFINED', 1: 'FLOAT', 2: 'UINT8', 3: 'INT8', 4: 'UINT16', 5: 'INT16', 6: 'INT32', 7: 'INT64', 8: 'STRING', 9: 'BOOL',
  10: 'FLOAT16', 11: 'DOUBLE', 12: 'UINT32', 13: 'UINT64', 14: 'COMPLEX64', 15: 'COMPLEX128', 16: 'BFLOAT16',
};
export const AttributeType = { FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, FLOATS: 6, INTS: 7 } as const;

export interface StringStringEntry { key: string; value: string }
export interface TensorProto {
  name: string;
  dims: number[];
  dataType: number;
  rawData?: Uint8Array;
  floatData?: number[];
  int32Data?: number[];
  int64Data?: number[];
  doubleData?: number[];
  externalData?: StringStringEntry[];
  dataLocation?: number;
}
export interface AttributeProto {
  name: string;
  type: number;
  f?: number;
  i?: number;
  s?: Uint8Array;
  t?: TensorProto;
  /** A subgraph (If's then_branch / else_branch). */
  g?: GraphProto;
  floats?: number[];
  ints?: number[];
}
export interface NodeProto {
  name?: string;
  opType: string;
  domain?: string;
  input: string[];
  output: string[];
  attribute: AttributeProto[];
}
export interface Dimension { dimValue?: number; dimParam?: string }
export interface ValueInfoProto {
  name: string;
  type?: { tensorType?: { elemType: number; shape?: { dim: Dimension[] } } };
}
export interface GraphProto {
  name: string;
  node: NodeProto[];
  initializer: TensorProto[];
  input: ValueInfoProto[];
  output: ValueInfoProto[];
  valueInfo: ValueInfoProto[];
}
export interface OperatorSetId { domain: string; version: number }
export interface ModelProto {
  irVersion: number;
  opsetImport: OperatorSetId[];
  producerName?: string;
  producerVersion?: string;
  graph: GraphProto;
  metadataProps?: StringStringEntry[];
}

const root = protobuf.Root.fromJSON(protobuf.parse(readFileSync(new URL('./onnx.proto', import.meta.url), 'utf8'), { keepCase: false }).root.toJSON());
const Model = root.lookupType('onnx.ModelProto');

export function encodeModel(model: ModelProto): Uint8Array {
  return Model.encode(Model.fromObject(model)).finish();
}

/** Decode model bytes; a file that is not an ONNX model fails with the file named. */
export function decodeModel(bytes: Uint8Array, file = 'model.onnx'): ModelProto {
  let message: protobuf.Message;
  try {
    message = Model.decode(bytes);
  } catch (err) {
    throw new Error(`${file}: not a valid ONNX model (${(err as Error).message})`);
  }
  const m = Model.toObject(message, { longs: Number, enums: Number, arrays: true, defaults: false }) as ModelProto;
  if (!m.graph) throw new Error(`${file}: ONNX model has no graph`);
  return m;
}

/** The elements of a tensor whose data is inline (raw_data or a typed field), as a typed array copy. */
export function tensorValues(t: TensorProto): Float32Array | BigInt64Array | Int32Array {
  const count = t.dims.reduce((a, b) => a * b, 1);
  switch (t.dataType) {
    case DataType.FLOAT:
      if (t.rawData && t.rawData.length) return new Float32Array(copyBytes(t.rawData).buffer, 0, count);
      return Float32Array.from(t.floatData ?? []);
    case DataType.INT64:
      if (t.rawData && t.rawData.length) return new BigInt64Array(copyBytes(t.rawData).buffer, 0, count);
      return BigInt64Array.from((t.int64Data ?? []).map((v) => BigInt(v)));
    case DataType.INT32:
      if (t.rawData && t.rawData.length) return new Int32Array(copyBytes(t.rawData).buffer, 0, count);
      return Int32Array.from(t.int32Data ?? []);
    default:
      throw new Error(`tensor "${t.name}": dtype ${DataTypeName[t.dataType] ?? t.dataType} is not supported (fp32, int64, int32 only)`);
  }
}

/** An aligned copy (protobuf's byte views may sit at any offset of a shared buffer). */
function copyBytes(b: Uint8Array): Uint8Array {
  const out = new Uint8Array(b.length);
  out.set(b);
  return out;
}

export function bytesOf(a: Float32Array | BigInt64Array | Int32Array | Uint32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}
