/**
 * Low-rank mode's graph rewrite (EGGROLL): every MatMul y = x·W whose W (m×n) is a perturbable weight
 * becomes y = x·W + (x·Aᵣ)·Bᵣ, where the factors are per-row inputs, so one forward over one copy of W
 * serves rows of different members: row b computes x_b·(W + sign·σ·A Bᵀ/√r). W stays an initializer
 * (prepacked by onnxruntime); the update is folded into it and the session rebuilt.
 *
 * MatMuls that read the same x (q/k/v, gate/up) share one pair of factor inputs, to cut op dispatches and
 * input bindings: A_g = [A₁ … A_k] is [batch, m, k·r] and B_g is block-diagonal [batch, k·r, Σnᵢ] with
 * target i's (sign·σ/√r)·Bᵢᵀ in block i, so x·A_g·B_g = [x·A₁·B₁ᵀ, …] (the zero blocks cost k·r·Σn per
 * token, nothing next to m·Σn), then one Split hands each MatMul its part. The rank is a symbolic
 * dimension, so one rewritten graph serves any r.
 *
 * A tied head, `com.microsoft.FusedMatMul(x, E, transB = 1)` over the embedding table E [vocab, hidden]
 * (tied-weights.ts), is a target too, perturbed as W = Eᵀ (m = hidden, n = vocab); the table's Gather
 * then adds each row's rows of the same perturbation, (A·B)ᵀ[ids] = B[:, ids]ᵀ·Aᵀ, so both uses of the
 * one tensor see the same member weights.
 */
import { DataType, type ModelProto, type NodeProto } from '../onnx/proto.ts';
import { valueInfo } from '../onnx/graph-builder.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';

export interface LowRankTarget {
  /** The weight's index in the engine's perturbable tensors. */
  weight: number;
  name: string;
  m: number;
  n: number;
  /** The weight is stored [n, m] and multiplied transposed (a tied head reading the embedding table). */
  transposed?: boolean;
}

/** Perturbed MatMuls that share an input x, and the names of their shared factor inputs. */
export interface LowRankGroup {
  /** Indices into the targets, in the order of the blocks. */
  targets: number[];
  m: number;
  a: string;
  b: string;
}

/** The weight a MatMul (or tied head) multiplies by, as an index into `weights`, when it is a 2-D weight of θ. */
function targetReader(weights: readonly NamedTensor[]): (n: NodeProto) => number | undefined {
  const byName = new Map(weights.map((w, i) => [w.name, i]));
  return (n) => {
    const wi = (n.opType === 'MatMul' && (n.domain ?? '') === '') || isTiedHead(n) ? byName.get(n.input[1]) : undefined;
    return wi !== undefined && weights[wi].dims.length === 2 ? wi : undefined;
  };
}

/**
 * The weights low-rank mode perturbs and updates, in canonical (weight) order: what the rewrite serves, and
 * what an update folds into without a session (trainer/training/export/).
 */
export function lowRankTargets(model: ModelProto, weights: readonly NamedTensor[], file = 'model.onnx'): LowRankTarget[] {
  const byName = new Map(weights.map((w, i) => [w.name, i]));
  const isTarget = targetReader(weights);
  const transposedWeights = new Set(model.graph.node.filter(isTiedHead).map(isTarget).filter((w): w is number => w !== undefined));
  // targets in canonical (weight) order: that order lays out the factors in each member's stream
  const targetWeights = [...new Set(model.graph.node.map(isTarget).filter((w): w is number => w !== undefined))].sort((a, b) => a - b);
  if (targetWeights.length === 0) throw new Error(`${file}: no MatMul reads a perturbable 2-D weight, so low-rank mode has nothing to perturb`);
  const targets: LowRankTarget[] = targetWeights.map((wi) => {
    const [rows, cols] = weights[wi].dims;
    return transposedWeights.has(wi) ? { weight: wi, name: weights[wi].name, m: cols, n: rows, transposed: true } : { weight: wi, name: weights[wi].name, m: rows, n: cols };
  });
  if (targets.some((t) => t.transposed) && model.graph.node.some((n) => n.opType === 'MatMul' && transposedWeights.has(byName.get(n.input[1]) ?? -1))) {
    throw new Error(`${file}: a weight is read both transposed (a tied head) and as a plain MatMul weight; low-rank mode cannot perturb it one way for both`);
  }
  return targets;
}

/** The rewrite over the MatMuls of every target. */
export function lowRankRewrite(model: ModelProto, weights: readonly NamedTensor[], file = 'model.onnx'): { model: ModelProto; targets: LowRankTarget[]; groups: LowRankGroup[] } {
  const isTarget = targetReader(weights);
  const targets = lowRankTargets(model, weights, file);
  const byName = new Map(weights.map((w, i) => [w.name, i]));
  const transposedWeights = new Set(targets.filter((t) => t.transposed).map((t) => t.weight));
  const targetOf = new Map(targets.map((t, i) => [t.weight, i]));

  // one group per distinct MatMul input x (a weight read from two inputs joins two groups: same factors)
  const groupNodes = new Map<string, NodeProto[]>();
  for (const n of model.graph.node) {
    if (isTarget(n) === undefined) continue;
    groupNodes.set(n.input[0], [...(groupNodes.get(n.input[0]) ?? []), n]);
  }
  const groups: LowRankGroup[] = [];
  const initializerType = new Map(model.graph.initializer.map((t) => [t.name, t.dataType]));
  /** The names a group's MatMuls read its factors by (the inputs, or their fp16 casts). */
  const factorIn = new Map<LowRankGroup, { a: string; b: string }>();
  const rewritten = new Map<NodeProto, NodeProto[]>();
  let g = 0;
  for (const [x, nodes] of groupNodes) {
    const members = nodes.map((n) => targetOf.get(isTarget(n)!)!);
    const group: LowRankGroup = { targets: members, m: targets[members[0]].m, a: `lowrank.${g}.a`, b: `lowrank.${g}.b` };
    groups.push(group);
    const base = `/lowrank/${g++}`;
    const xab = `${base}/xab`;
    // factors are fed fp32; an fp16 export's MatMuls read them cast to fp16
    const half = initializerType.get(targets[members[0]].name) === DataType.FLOAT16;
    const cast = (input: string): NodeProto => ({ name: `${input}/fp16`, opType: 'Cast', input: [input], output: [`${input}/fp16`], attribute: [{ name: 'to', type: 2, i: DataType.FLOAT16 }] });
    factorIn.set(group, half ? { a: `${group.a}/fp16`, b: `${group.b}/fp16` } : { a: group.a, b: group.b });
    const extra: NodeProto[] = [
      ...(half ? [cast(group.a), cast(group.b)] : []),
      { name: `${base}/xa`, opType: 'MatMul', input: [x, factorIn.get(group)!.a], output: [`${base}/xa`], attribute: [] },
      { name: xab, opType: 'MatMul', input: [`${base}/xa`, factorIn.get(group)!.b], output: [xab], attribute: [] },
    ];
    const parts = nodes.length === 1 ? [xab] : nodes.map((_, i) => `${base}/part${i}`);
    if (nodes.length > 1) {
      const splitSizes = `${base}/split_sizes`;
      model = withInt64Initializer(model, splitSizes, members.map((t) => targets[t].n));
      extra.push({ name: `${base}/split`, opType: 'Split', input: [xab, splitSizes], output: parts, attribute: [{ name: 'axis', type: 2, i: -1 }] });
    }
    nodes.forEach((n, i) => {
      const dense = `${n.output[0]}/dense`;
      rewritten.set(n, [{ ...n, output: [dense] }, ...(i === nodes.length - 1 ? extra : []), { name: `${n.output[0]}/lowrank_add`, opType: 'Add', input: [dense, parts[i]], output: [n.output[0]], attribute: [] }]);
    });
  }
  // A tied table's Gather reads the perturbed table too: its output gains B[:, ids]ᵀ·Aᵀ per row.
  for (const n of model.graph.node) {
    const wi = n.opType === 'Gather' && (n.domain ?? '') === '' ? byName.get(n.input[0]) : undefined;
    if (wi === undefined || !transposedWeights.has(wi)) continue;
    const group = groups.find((gr) => gr.targets.some((t) => targets[t].weight === wi))!;
    if (group.targets.length !== 1) throw new Error(`${file}: the tied head's input is read by other perturbed MatMuls; low-rank mode cannot perturb its Gather`);
    const axis = n.attribute.find((a) => a.name === 'axis');
    if (axis && Number(axis.i ?? 0) !== 0) throw new Error(`${file}: Gather "${n.name}" reads the tied table on axis ${axis.i}, not 0`);
    const base = `/lowrank/gather_${wi}`;
    model = withInt64Initializer(model, `${base}/one`, [1]);
    model = withInt64Initializer(model, `${base}/two`, [2]);
    const dense = `${n.output[0]}/dense`;
    const extra: NodeProto[] = [
      { name: `${base}/ids`, opType: 'Unsqueeze', input: [n.input[1], `${base}/one`], output: [`${base}/ids`], attribute: [] },
      { name: `${base}/shape`, opType: 'Shape', input: [group.b], output: [`${base}/shape`], attribute: [] },
      { name: `${base}/rank`, opType: 'Slice', input: [`${base}/shape`, `${base}/one`, `${base}/two`], output: [`${base}/rank`], attribute: [] },
      { name: `${base}/grid`, opType: 'Concat', input: [`${base}/one`, `${base}/rank`, `${base}/one`], output: [`${base}/grid`], attribute: [{ name: 'axis', type: 2, i: 0 }] },
      { name: `${base}/index`, opType: 'Expand', input: [`${base}/ids`, `${base}/grid`], output: [`${base}/index`], attribute: [] },
      { name: `${base}/picked`, opType: 'GatherElements', input: [factorIn.get(group)!.b, `${base}/index`], output: [`${base}/picked`], attribute: [{ name: 'axis', type: 2, i: 2 }] },
      { name: `${base}/pickedT`, opType: 'Transpose', input: [`${base}/picked`], output: [`${base}/pickedT`], attribute: [{ name: 'perm', type: 7, ints: [0, 2, 1] }] },
      { name: `${base}/aT`, opType: 'Transpose', input: [factorIn.get(group)!.a], output: [`${base}/aT`], attribute: [{ name: 'perm', type: 7, ints: [0, 2, 1] }] },
      { name: `${base}/delta`, opType: 'MatMul', input: [`${base}/pickedT`, `${base}/aT`], output: [`${base}/delta`], attribute: [] },
      { name: `${base}/add`, opType: 'Add', input: [dense, `${base}/delta`], output: [n.output[0]], attribute: [] },
    ];
    rewritten.set(n, [{ ...n, output: [dense] }, ...extra]);
  }
  // A group's factor nodes go right after its last dense MatMul, so every input they read exists by then.
  const node = model.graph.node.flatMap((n) => rewritten.get(n) ?? [n]);
  const ordered = topologicalOrder(node);
  const inputs = groups.flatMap((gr) => {
    const width = gr.targets.reduce((s, t) => s + targets[t].n, 0);
    const rankDim = gr.targets.length === 1 ? 'rank' : `rank_x${gr.targets.length}`;
    return [valueInfo(gr.a, DataType.FLOAT, ['batch_size', gr.m, rankDim]), valueInfo(gr.b, DataType.FLOAT, ['batch_size', rankDim, width])];
  });
  return { model: { ...model, graph: { ...model.graph, node: ordered, input: [...model.graph.input, ...inputs] } }, targets, groups };
}

/** A tied head: FusedMatMul(x, E, transB = 1) with no other scaling or transposition. */
function isTiedHead(n: NodeProto): boolean {
  if (n.opType !== 'FusedMatMul' || n.domain !== 'com.microsoft') return false;
  const get = (name: string) => n.attribute.find((a) => a.name === name);
  const alpha = get('alpha');
  return Number(get('transB')?.i ?? 0) === 1 && Number(get('transA')?.i ?? 0) === 0 && (alpha === undefined || alpha.f === 1) && n.input.length === 2;
}

function withInt64Initializer(model: ModelProto, name: string, values: number[]): ModelProto {
  const raw = new Uint8Array(BigInt64Array.from(values.map(BigInt)).buffer);
  return { ...model, graph: { ...model.graph, initializer: [...model.graph.initializer, { name, dims: [values.length], dataType: DataType.INT64, rawData: raw }] } };
}

/** ONNX wants nodes in topological order; the Adds read parts produced after later dense MatMuls. */
function topologicalOrder(nodes: NodeProto[]): NodeProto[] {
  const producer = new Map<string, number>();
  nodes.forEach((n, i) => n.output.forEach((o) => producer.set(o, i)));
  const state = new Uint8Array(nodes.length); // 0 new, 1 visiting, 2 done
  const out: NodeProto[] = [];
  const visit = (i: number) => {
    if (state[i] === 2) return;
    if (state[i] === 1) throw new Error(`low-rank rewrite made a cycle at node ${nodes[i].name}`);
    state[i] = 1;
    for (const input of nodes[i].input) {
      const p = producer.get(input);
      if (p !== undefined) visit(p);
    }
    state[i] = 2;
    out.push(nodes[i]);
  };
  // recursion depth is bounded by the graph's depth (a few hundred nodes for these decoders)
  for (let i = 0; i < nodes.length; i++) visit(i);
  return out;
}
