/**
 * Low-rank mode's graph rewrite (EGGROLL): every MatMul y = x·W whose W (m×n) is a perturbable weight
 * becomes y = x·W + (x·Aᵣ)·Bᵣ, where Aᵣ [batch, m, r] and Bᵣ [batch, r, n] are per-row inputs. The host
 * feeds Aᵣ = A and Bᵣ = (sign·σ/√r)·Bᵀ for a member's row and zeros for a base row, so one forward over one
 * copy of W serves rows of different members: row b computes x_b·(W + sign·σ·A Bᵀ/√r). W stays an
 * initializer (prepacked by onnxruntime); the update is folded into it and the session rebuilt. The rank is
 * a symbolic dimension, so one rewritten graph serves any r.
 */
import { DataType, type ModelProto, type NodeProto } from '../model/onnx/proto.ts';
import { valueInfo } from '../model/onnx/graph-builder.ts';
import type { NamedTensor } from '../model/weights.ts';

export interface LowRankTarget {
  /** The weight's index in the engine's perturbable tensors. */
  weight: number;
  name: string;
  m: number;
  n: number;
  /** Input names of its factors. */
  a: string;
  b: string;
}

export function lowRankRewrite(model: ModelProto, weights: readonly NamedTensor[], file = 'model.onnx'): { model: ModelProto; targets: LowRankTarget[] } {
  const byName = new Map(weights.map((w, i) => [w.name, i]));
  const targets = new Map<string, LowRankTarget>();
  const nodes: NodeProto[] = [];
  for (const n of model.graph.node) {
    const wi = n.opType === 'MatMul' && (n.domain ?? '') === '' ? byName.get(n.input[1]) : undefined;
    if (wi === undefined || weights[wi].dims.length !== 2) {
      nodes.push(n);
      continue;
    }
    const w = weights[wi];
    let t = targets.get(w.name);
    if (!t) {
      const j = targets.size;
      t = { weight: wi, name: w.name, m: w.dims[0], n: w.dims[1], a: `lowrank.${j}.a`, b: `lowrank.${j}.b` };
      targets.set(w.name, t);
    }
    const base = `${n.output[0]}/lowrank`;
    nodes.push(
      { ...n, output: [`${base}/dense`] },
      { name: `${base}/xa`, opType: 'MatMul', input: [n.input[0], t.a], output: [`${base}/xa`], attribute: [] },
      { name: `${base}/xab`, opType: 'MatMul', input: [`${base}/xa`, t.b], output: [`${base}/xab`], attribute: [] },
      { name: `${base}/sum`, opType: 'Add', input: [`${base}/dense`, `${base}/xab`], output: [n.output[0]], attribute: [] },
    );
  }
  if (targets.size === 0) throw new Error(`${file}: no MatMul reads a perturbable 2-D weight, so low-rank mode has nothing to perturb`);
  const list = [...targets.values()].sort((x, y) => x.weight - y.weight);
  const inputs = list.flatMap((t) => [valueInfo(t.a, DataType.FLOAT, ['batch_size', t.m, 'rank']), valueInfo(t.b, DataType.FLOAT, ['batch_size', 'rank', t.n])]);
  return { model: { ...model, graph: { ...model.graph, node: nodes, input: [...model.graph.input, ...inputs] } }, targets: list };
}
