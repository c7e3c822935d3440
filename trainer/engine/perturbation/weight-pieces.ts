/**
 * θ's tensors cut into the pieces the device noise graph (device-noise-graph.ts) takes, and full mode's graph
 * taking its weights as those pieces. One call of the noise graph covers elements of one key block (2^32
 * stream indices, shared/device-noise.ts) and fewer than 2^31 of them (its int32 Range), so a tensor is cut
 * where its stream crosses a block boundary and every `maxPiece` elements. The graph takes each piece as a
 * flat input `{weight}#{j}` and rebuilds the weight (Concat, then Reshape) inside the session, so a member's
 * pieces, made on the device, are fed there as they are.
 */
import { BLOCK } from '../../../shared/device-noise.ts';
import type { ParameterSegment } from '../../../shared/es.ts';
import { valueInfo } from '../onnx/graph-builder.ts';
import { DataType, type ModelProto, type NodeProto, type TensorProto } from '../onnx/proto.ts';

/** The most elements one noise-graph call covers: its indices are an int32 Range. */
export const MAX_PIECE = 2 ** 31 - 1;

export interface WeightPiece {
  /** The graph input that takes it. */
  input: string;
  /** Where it starts in its tensor, and its length. */
  start: number;
  count: number;
  /** Its first element's stream index (the tensor's offset + start). */
  offset: number;
}

/** Each segment's pieces: cut at key-block boundaries of its stream and every `maxPiece` elements. */
export function weightPieces(segments: readonly ParameterSegment[], maxPiece = MAX_PIECE): WeightPiece[][] {
  if (!Number.isInteger(maxPiece) || maxPiece < 1 || maxPiece > MAX_PIECE) throw new RangeError(`maxPiece must be an integer in [1, ${MAX_PIECE}], got ${maxPiece}`);
  return segments.map((s) => {
    const pieces: WeightPiece[] = [];
    for (let start = 0; start < s.data.length; ) {
      const offset = s.offset + start;
      const blockEnd = (Math.floor(offset / BLOCK) + 1) * BLOCK;
      const count = Math.min(s.data.length - start, maxPiece, blockEnd - offset);
      pieces.push({ input: `${s.name}#${pieces.length}`, start, count, offset });
      start += count;
    }
    return pieces;
  });
}

/**
 * `model` (θ as inputs, weightsAsInputs' form) taking each weight as its pieces: inputs `{weight}#{j}`
 * float32 [count], joined and reshaped to the weight's dims ahead of every other node.
 */
export function pieceInputs(model: ModelProto, weights: ReadonlyArray<{ name: string; dims: number[] }>, pieces: readonly WeightPiece[][]): ModelProto {
  const g = model.graph;
  const names = new Set(weights.map((w) => w.name));
  for (const i of g.input) if (names.has(i.name) && i.type?.tensorType?.elemType !== DataType.FLOAT) throw new Error(`${i.name}: only float32 weights can be fed as device pieces`);
  const nodes: NodeProto[] = [];
  const shapes: TensorProto[] = [];
  weights.forEach((w, wi) => {
    const parts = pieces[wi];
    if (parts.length === 0) throw new Error(`${w.name}: a weight with no elements cannot be fed as pieces`);
    const shape = `${w.name}#shape`;
    shapes.push({ name: shape, dims: [w.dims.length], dataType: DataType.INT64, rawData: new Uint8Array(BigInt64Array.from(w.dims.map(BigInt)).buffer) });
    let flat = parts[0].input;
    if (parts.length > 1) {
      flat = `${w.name}#flat`;
      nodes.push({ name: `${w.name}#concat`, opType: 'Concat', domain: '', input: parts.map((p) => p.input), output: [flat], attribute: [{ name: 'axis', type: 2, i: 0 }] });
    }
    nodes.push({ name: `${w.name}#reshape`, opType: 'Reshape', domain: '', input: [flat, shape], output: [w.name], attribute: [] });
  });
  return {
    ...model,
    graph: {
      ...g,
      node: [...nodes, ...g.node],
      initializer: [...g.initializer, ...shapes],
      input: [...g.input.filter((i) => !names.has(i.name)), ...pieces.flat().map((p) => valueInfo(p.input, DataType.FLOAT, [p.count]))],
    },
  };
}
