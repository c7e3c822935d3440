/**
 * Optimum's merged decoder (`decoder_model_merged.onnx`) holds two decoders under one `If` on the boolean
 * input `use_cache_branch`: with past (then_branch) and without (else_branch), their weights shared as
 * top-level initializers. esopt always feeds the KV caches (empty at prefill), so at load the `If` is
 * replaced by its with-past branch, inlined: the graph becomes the plain decoder-with-past layout that the
 * checks, the perturbation rewrites and the sessions work on, and the other branch's nodes (and any
 * initializer only they read) are dropped.
 */
import { type GraphProto, type ModelProto, type NodeProto } from '../onnx/proto.ts';
import { MERGED } from './export-layout.ts';

/** Rewrites `model` in place; returns false when it is not a merged decoder. */
export function inlineCacheBranch(model: ModelProto, file: string): boolean {
  const g = model.graph;
  if (!g.input.some((i) => i.name === 'use_cache_branch')) return false;
  const refuse = (why: string) => new Error(`${file}: ${why}; this is ${MERGED}`);
  const ifs = g.node.filter((n) => n.opType === 'If' && n.input[0] === 'use_cache_branch');
  if (ifs.length !== 1) throw refuse(`${ifs.length} If nodes read "use_cache_branch" (esopt inlines exactly one)`);
  const node = ifs[0];
  const branch = node.attribute.find((a) => a.name === 'then_branch')?.g as GraphProto | undefined;
  const readsPast = (b: GraphProto | undefined) => !!b && b.node.some((n) => n.input.some((i) => i.startsWith('past_key_values.')));
  if (!branch || !readsPast(branch)) throw refuse('its then_branch (use_cache_branch = true) does not read past_key_values');
  if (branch.output.length !== node.output.length) throw refuse(`its then_branch has ${branch.output.length} outputs for the If's ${node.output.length}`);

  // the branch's outputs take the If's names; its inner initializers join the graph's
  const rename = new Map(branch.output.map((o, i) => [o.name, node.output[i]]));
  const names = new Set(g.initializer.map((t) => t.name));
  for (const t of branch.initializer ?? []) {
    if (names.has(t.name)) throw refuse(`then_branch initializer "${t.name}" shadows a graph initializer`);
    g.initializer.push(t);
  }
  const inlined: NodeProto[] = branch.node.map((n) => ({ ...n, input: n.input.map((i) => rename.get(i) ?? i), output: n.output.map((o) => rename.get(o) ?? o) }));
  // a branch output that is an outer value itself (an input passed through) needs a node to carry it
  for (const [inner, outer] of rename) {
    if (!branch.node.some((n) => n.output.includes(inner))) inlined.push({ name: `${outer}/identity`, opType: 'Identity', domain: '', input: [inner], output: [outer], attribute: [] });
  }
  g.node.splice(g.node.indexOf(node), 1, ...inlined);
  g.input = g.input.filter((i) => i.name !== 'use_cache_branch');
  const read = new Set(g.node.flatMap((n) => [...n.input, ...n.attribute.flatMap((a) => (a.g ? subgraphReads(a.g) : []))]));
  g.initializer = g.initializer.filter((t) => read.has(t.name));
  return true;
}

/** Every name a subgraph's nodes read, nested subgraphs included. */
function subgraphReads(g: GraphProto): string[] {
  return g.node.flatMap((n) => [...n.input, ...n.attribute.flatMap((a) => (a.g ? subgraphReads(a.g) : []))]);
}
