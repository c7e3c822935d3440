/**
 * θ's tensors under the Hugging Face parameter names and layouts of the model they came from. A tensor
 * keeps its own name where that is a parameter name (`model.layers.0.self_attn.q_proj.weight`); one that
 * constant folding renamed (`onnx::MatMul_123`) is named by the module of the MatMul that reads it
 * (`/model/layers.0/self_attn/q_proj/MatMul` → `model.layers.0.self_attn.q_proj.weight`), placed under
 * the same parent as the named parameters where the exporter's scope skipped one (`/layers.0/…` beside
 * `model.layers.0.input_layernorm.weight`). A weight a MatMul reads as [in, out] becomes nn.Linear's
 * [out, in]; embeddings and weights read transposed (transB) are already [out, in]. A tied head is the
 * embedding only. A tensor that cannot be named or laid out this way is refused by name, never guessed,
 * and so is a float initializer named as a parameter that is not θ (the file would silently lack it).
 */
import type { LoadedModel } from '../../engine/model/model-dir.ts';
import { CONSTANT_NAME } from '../../engine/model/perturbable.ts';
import { DataType, type NodeProto } from '../../engine/onnx/proto.ts';

export interface HfTensor {
  /** The parameter's name in the Hugging Face model. */
  name: string;
  /** θ's tensor it is written from. */
  source: number;
  /** nn.Linear's [out, in] from θ's [in, out]. */
  transpose: boolean;
  dims: number[];
}

export interface HfParameters {
  tensors: HfTensor[];
  /** The LM head reads the embedding table (written once; config.json's tie_word_embeddings says so). */
  tiedHead: boolean;
}

/** Dotted identifiers, as PyTorch's `named_parameters()` writes them. */
const PARAMETER_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$/;
/** A node of the exporter's scope: `/model/layers.0/self_attn/q_proj/MatMul` (a `_N` suffix for repeats). */
const SCOPED_MATMUL = /^\/((?:[A-Za-z0-9_.]+\/)*[A-Za-z0-9_.]+)\/(?:MatMul|Gemm|FusedMatMul)(?:_\d+)?$/;

const attr = (n: NodeProto, name: string) => Number(n.attribute.find((a) => a.name === name)?.i ?? 0);
const isMatMul = (n: NodeProto) => (n.opType === 'MatMul' && (n.domain ?? '') === '') || (n.opType === 'Gemm' && (n.domain ?? '') === '') || (n.opType === 'FusedMatMul' && n.domain === 'com.microsoft');

/** How a reader holds a 2-D weight: [in, out] (x·W), [out, in] (x·Wᵀ, or an embedding table), or not as a weight at all. */
function layoutOf(n: NodeProto, slot: number): 'in-out' | 'out-in' | 'other' {
  if (isMatMul(n) && slot === 1) return n.opType !== 'MatMul' && attr(n, 'transB') === 1 ? 'out-in' : 'in-out';
  if (n.opType === 'Gather' && slot === 0) return 'out-in';
  return isMatMul(n) ? 'other' : 'out-in';
}

/** The parents under which the named parameters hold a module called `first` (`model.` for `layers`). */
function parentsOf(first: string, named: readonly string[]): Set<string> {
  const parents = new Set<string>();
  for (const name of named) {
    const parts = name.split('.');
    parts.forEach((p, i) => {
      if (p === first && i < parts.length - 1) parents.add(parts.slice(0, i).map((q) => `${q}.`).join(''));
    });
  }
  return parents;
}

export function hfParameters(model: LoadedModel): HfParameters {
  const g = model.graph.graph;
  const readers = new Map<string, Array<{ node: NodeProto; slot: number }>>();
  for (const node of g.node) node.input.forEach((name, slot) => readers.set(name, [...(readers.get(name) ?? []), { node, slot }]));
  const named = model.weights.map((w) => w.name).filter((n) => PARAMETER_NAME.test(n));
  const refused: string[] = [];
  const tensors: HfTensor[] = [];
  let tiedHead = false;

  model.weights.forEach((w, source) => {
    const uses = readers.get(w.name) ?? [];
    const layouts = new Set(w.dims.length === 2 ? uses.map((u) => layoutOf(u.node, u.slot)) : []);
    if (layouts.has('other') || layouts.size > 1) {
      refused.push(`"${w.name}" (read as ${uses.map((u) => `input ${u.slot} of ${u.node.opType} "${u.node.name ?? ''}"`).join(' and ')}: no one nn.Module layout)`);
      return;
    }
    if (uses.some((u) => u.node.opType === 'Gather') && uses.some((u) => isMatMul(u.node))) tiedHead = true;
    let name = PARAMETER_NAME.test(w.name) ? w.name : undefined;
    if (!name) {
      const modules = new Set(uses.map((u) => (isMatMul(u.node) && u.slot === 1 ? SCOPED_MATMUL.exec(u.node.name ?? '')?.[1].replaceAll('/', '.') : undefined)));
      const [module] = modules;
      if (modules.size !== 1 || module === undefined) {
        refused.push(`"${w.name}" (${uses.length ? `read by ${uses.map((u) => `${u.node.opType} "${u.node.name ?? ''}"`).join(', ')}` : 'read by no node'}: not the weight of one named MatMul)`);
        return;
      }
      const parents = parentsOf(module.split('.')[0], named);
      if (parents.size > 1) {
        refused.push(`"${w.name}" (its MatMul's module ${module} sits under ${[...parents].map((p) => p || '(the root)').join(' and ')} among the named parameters)`);
        return;
      }
      name = `${[...parents][0] ?? ''}${module}.weight`;
    }
    const transpose = layouts.has('in-out');
    tensors.push({ name, source, transpose, dims: transpose ? [w.dims[1], w.dims[0]] : [...w.dims] });
  });
  const theta = new Set(model.weights.map((w) => w.name));
  for (const t of g.initializer) {
    const float = t.dataType === DataType.FLOAT || t.dataType === DataType.FLOAT16;
    if (float && !theta.has(t.name) && PARAMETER_NAME.test(t.name) && !CONSTANT_NAME.test(t.name) && readers.has(t.name)) {
      refused.push(`"${t.name}" (a parameter by its name, but not among the weights esopt trains)`);
    }
  }
  const byName = new Map<string, string[]>();
  for (const t of tensors) byName.set(t.name, [...(byName.get(t.name) ?? []), model.weights[t.source].name]);
  for (const [name, sources] of byName) if (sources.length > 1) refused.push(`${sources.map((s) => `"${s}"`).join(', ')} (all would be ${name})`);
  if (refused.length) {
    throw new Error(`${model.file ?? model.dir}: cannot map ${refused.length === 1 ? 'a tensor' : `${refused.length} tensors`} to the model's Hugging Face parameters, so no safetensors export (esopt refuses rather than guess): ${refused.join('; ')}`);
  }
  return { tensors, tiedHead };
}
