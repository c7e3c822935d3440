/**
 * Full mode's graph: the perturbable initializers become graph inputs, so each run reads θ straight from
 * the Float32Arrays the trainer perturbs, restores and updates in place (no session reload per member).
 */
import { DataType, type ModelProto } from '../onnx/proto.ts';
import { valueInfo } from '../onnx/graph-builder.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';

export function weightsAsInputs(model: ModelProto, weights: readonly NamedTensor[]): ModelProto {
  const names = new Set(weights.map((w) => w.name));
  const g = model.graph;
  // each input keeps its initializer's dtype (an fp16 export's weights are fed fp16)
  const dtype = new Map(g.initializer.filter((t) => names.has(t.name)).map((t) => [t.name, t.dataType]));
  return {
    ...model,
    graph: {
      ...g,
      initializer: g.initializer.filter((t) => !names.has(t.name)),
      input: [...g.input.filter((i) => !names.has(i.name)), ...weights.map((w) => valueInfo(w.name, dtype.get(w.name) ?? DataType.FLOAT, w.dims))],
    },
  };
}
