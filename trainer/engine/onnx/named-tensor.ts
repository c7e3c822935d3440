/** A weight of a graph by name: the unit θ is laid out in and the graph rewrites work on. */
export interface NamedTensor {
  name: string;
  /** ONNX layout: MatMul weights are [in, out]. */
  dims: number[];
  data: Float32Array;
}
