/**
 * A model's tensors as targets are chosen from (shared/targets.ts): which of θ's tensors a mode can perturb
 * (full mode: every one; low-rank mode: its matrices), which of them are linear weights (2-D, read as a
 * MatMul/Gemm weight, neither an embedding table nor the LM head) and which carry a tied head. A selection
 * is a set of indices into the model's tensors; `null` stands for all of them, so `all` runs the code paths
 * it always ran.
 */
import { selectTargets, targetsAll, type TargetCandidate, type Targets } from '../../../shared/targets.ts';
import type { GraphProto, NodeProto } from '../onnx/proto.ts';
import type { LoadedModel } from './model-dir.ts';

/** Ops between the head's MatMul and `logits` that act on each position alone (as in logits-last.ts). */
const PER_POSITION = new Set(['Cast', 'Mul', 'Div', 'Add', 'Sub', 'Tanh', 'Identity', 'Slice']);
const MATMULS = new Set(['MatMul', 'Gemm', 'FusedMatMul']);

/** The weight the LM head multiplies by: the MatMul found walking back from `logits` through per-position ops. */
function headWeight(g: GraphProto): string | undefined {
  const producer = new Map<string, NodeProto>();
  for (const n of g.node) for (const o of n.output) producer.set(o, n);
  let node = producer.get('logits');
  while (node && !MATMULS.has(node.opType) && PER_POSITION.has(node.opType)) node = producer.get(node.input[0]);
  return node && MATMULS.has(node.opType) ? node.input[1] : undefined;
}

/** `/layers.0/self_attn/q_proj/MatMul` → `layers.0.self_attn.q_proj`: the module path an exporter names its nodes by. */
function moduleOf(nodeName: string | undefined): string | undefined {
  const parts = (nodeName ?? '').split('/').filter((p) => p !== '');
  return parts.length >= 2 ? parts.slice(0, -1).join('.') : undefined;
}

/** The tensor candidates of a model, each with the index of its weight. */
function candidatesOf(model: LoadedModel, weightIndices: readonly number[]): TargetCandidate[] {
  const g = model.graph.graph;
  const head = headWeight(g);
  const embeddings = new Set(g.node.filter((n) => n.opType === 'Gather').map((n) => n.input[0]));
  const matmulWeights = new Set(g.node.filter((n) => MATMULS.has(n.opType)).map((n) => n.input[1]));
  const modules = new Map<string, string>();
  for (const n of g.node) {
    const module = MATMULS.has(n.opType) ? moduleOf(n.name) : undefined;
    if (module && !modules.has(n.input[1])) modules.set(n.input[1], module);
  }
  // a head reading the embedding table is tied to it (one tensor): the names a user may know it by
  const tiedNames = ['lm_head.weight', 'lm_head', ...(model.rewrites?.tiedCopy ? [model.rewrites.tiedCopy.name] : [])];
  return weightIndices.map((i) => {
    const w = model.weights[i];
    const linear = w.dims.length === 2 && matmulWeights.has(w.name) && !embeddings.has(w.name) && w.name !== head;
    const tied = w.name === head && embeddings.has(w.name);
    // a tied table's module is the head's, not the one a pattern should find it by
    const module = tied ? undefined : modules.get(w.name);
    return { name: w.name, linear, ...(module ? { module } : {}), ...(tied ? { tiedHead: tiedNames } : {}) };
  });
}

export class TargetTensors {
  private readonly candidates: TargetCandidate[];
  private readonly cache = new Map<string, ReadonlySet<number> | null>();

  /**
   * `weightIndices`: the model tensors the mode perturbs, ascending; `what` names them in errors
   * ("full mode's tensors").
   */
  constructor(
    model: LoadedModel,
    private readonly weightIndices: readonly number[],
    private readonly what: string,
  ) {
    this.candidates = candidatesOf(model, weightIndices);
  }

  /** The model tensors `targets` selects, by index; null when it selects every one the mode perturbs. */
  select(targets: Targets | undefined): ReadonlySet<number> | null {
    if (targets === undefined || targetsAll(targets)) return null;
    const key = JSON.stringify(targets);
    if (!this.cache.has(key)) {
      const chosen = selectTargets(targets, this.candidates, this.what);
      this.cache.set(key, chosen.length === this.candidates.length ? null : new Set(chosen.map((c) => this.weightIndices[c])));
    }
    return this.cache.get(key)!;
  }

  /** The selected tensors' names, in θ's order. */
  names(targets: Targets): string[] {
    const chosen = this.select(targets);
    return this.candidates.filter((_, k) => !chosen || chosen.has(this.weightIndices[k])).map((c) => c.name);
  }
}
