/**
 * A small builder for ONNX graphs: nodes get unique output names, constants become initializers, and the
 * result is a plain ModelProto for proto.ts to encode.
 */
import { AttributeType, bytesOf, DataType, type AttributeProto, type GraphProto, type ModelProto, type NodeProto, type TensorProto, type ValueInfoProto } from './proto.ts';

export type Attr = number | number[] | string | { floats: number[] } | { float: number };
export type Dim = number | string;

export const OPSET = 17;
export const IR_VERSION = 8;

export class GraphBuilder {
  private readonly nodes: NodeProto[] = [];
  private readonly initializers: TensorProto[] = [];
  private readonly inputs: ValueInfoProto[] = [];
  private readonly outputs: ValueInfoProto[] = [];
  private counter = 0;

  /** One node; returns its output names (`outputs` of them). */
  op(opType: string, inputs: string[], attrs: Record<string, Attr> = {}, outputs = 1, domain = ''): string[] {
    const id = this.counter++;
    const out = Array.from({ length: outputs }, (_, i) => `/${opType.toLowerCase()}_${id}${outputs > 1 ? `_${i}` : ''}`);
    this.nodes.push({ name: `${opType}_${id}`, opType, domain, input: inputs, output: out, attribute: Object.entries(attrs).map(([n, v]) => attribute(n, v)) });
    return out;
  }

  /** One node with a single output. */
  op1(opType: string, inputs: string[], attrs: Record<string, Attr> = {}): string {
    return this.op(opType, inputs, attrs)[0];
  }

  /** Rename a node output to a graph-visible name (a graph output such as `logits`). */
  nameOutput(value: string, name: string): string {
    for (const n of this.nodes) n.output = n.output.map((o) => (o === value ? name : o));
    for (const n of this.nodes) n.input = n.input.map((o) => (o === value ? name : o));
    return name;
  }

  floatTensor(name: string, data: Float32Array, dims: number[]): string {
    this.initializers.push({ name, dims, dataType: DataType.FLOAT, rawData: bytesOf(data) });
    return name;
  }

  int64Const(values: number[], name = `/const_${this.counter++}`): string {
    this.initializers.push({ name, dims: [values.length], dataType: DataType.INT64, rawData: bytesOf(BigInt64Array.from(values.map(BigInt))) });
    return name;
  }

  uint32Const(values: number[], name = `/const_${this.counter++}`): string {
    this.initializers.push({ name, dims: [values.length], dataType: DataType.UINT32, rawData: bytesOf(Uint32Array.from(values)) });
    return name;
  }

  int32Scalar(value: number, name = `/const_${this.counter++}`): string {
    this.initializers.push({ name, dims: [], dataType: DataType.INT32, rawData: bytesOf(Int32Array.of(value)) });
    return name;
  }

  floatScalar(value: number, name = `/const_${this.counter++}`): string {
    this.initializers.push({ name, dims: [], dataType: DataType.FLOAT, rawData: bytesOf(Float32Array.of(value)) });
    return name;
  }

  input(name: string, elemType: number, dims: Dim[]): string {
    this.inputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  output(name: string, elemType: number, dims: Dim[]): void {
    this.outputs.push(valueInfo(name, elemType, dims));
  }

  model(name: string, metadata: Record<string, string> = {}): ModelProto {
    const graph: GraphProto = { name, node: this.nodes, initializer: this.initializers, input: this.inputs, output: this.outputs, valueInfo: [] };
    return {
      irVersion: IR_VERSION,
      opsetImport: [{ domain: '', version: OPSET }, { domain: 'com.microsoft', version: 1 }],
      producerName: 'esopt',
      producerVersion: '0.1.0',
      graph,
      metadataProps: Object.entries(metadata).map(([key, value]) => ({ key, value })),
    };
  }
}

export function valueInfo(name: string, elemType: number, dims: Dim[]): ValueInfoProto {
  return { name, type: { tensorType: { elemType, shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) } } } };
}

function attribute(name: string, v: Attr): AttributeProto {
  if (typeof v === 'number') return { name, type: AttributeType.INT, i: v };
  if (typeof v === 'string') return { name, type: AttributeType.STRING, s: new TextEncoder().encode(v) };
  if (Array.isArray(v)) return { name, type: AttributeType.INTS, ints: v };
  if ('float' in v) return { name, type: AttributeType.FLOAT, f: v.float };
  return { name, type: AttributeType.FLOATS, floats: v.floats };
}
