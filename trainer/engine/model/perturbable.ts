/**
 * Which initializers are θ. Built and loaded models use one rule: fp32 or fp16 tensors that are a MatMul/Gemm
 * weight, a Gather table (embeddings) or named like a module parameter (`*.weight`, `*.bias`, which is how
 * optimum names norm scales); rotary caches and other constants are not perturbed.
 */
import { DataType, type GraphProto, type TensorProto } from '../onnx/proto.ts';

/** Buffers computed from the config (rotary tables): never parameters, never perturbed. */
export const CONSTANT_NAME = /rotary|inv_freq|cos_cache|sin_cache|cos_cached|sin_cached/i;

function usedAs(graph: GraphProto): Map<string, Set<string>> {
  const uses = new Map<string, Set<string>>();
  for (const n of graph.node) {
    n.input.forEach((name, slot) => {
      const role = `${n.opType}:${slot}`;
      const set = uses.get(name) ?? new Set<string>();
      set.add(role);
      uses.set(name, set);
    });
  }
  return uses;
}

const usesCache = new WeakMap<GraphProto, Map<string, Set<string>>>();

export function isPerturbable(t: TensorProto, graph: GraphProto): boolean {
  if ((t.dataType !== DataType.FLOAT && t.dataType !== DataType.FLOAT16) || t.dims.length === 0 || CONSTANT_NAME.test(t.name)) return false;
  let uses = usesCache.get(graph);
  if (!uses) {
    uses = usedAs(graph);
    usesCache.set(graph, uses);
  }
  const roles = uses.get(t.name) ?? new Set<string>();
  if (roles.size === 0) return false;
  if (t.dims.length === 2 && (roles.has('MatMul:1') || roles.has('Gemm:1') || roles.has('Gather:0'))) return true;
  return /\.(weight|bias)$/.test(t.name);
}
