/**
 * A tied LM head is one entry of θ. PyTorch's ONNX exporter writes a tied head as a second initializer —
 * the embedding transposed by constant folding (`onnx::MatMul_…`, [hidden, vocab]), a duplicate
 * (`lm_head.weight`, [vocab, hidden]) read through a Transpose, or a Transpose node over the embedding
 * itself — and each would be perturbed and updated apart, breaking the tie at the first update. At load
 * the head becomes `com.microsoft.FusedMatMul(x, embedding, transB = 1)`: it reads the embedding table
 * itself, transposed inside the kernel, so the table is held once (as in inference) and every
 * perturbation, restore and update reaches both uses. A tie is detected from the graph (bit-equal data)
 * and checked against config.json's `tie_word_embeddings`.
 */
import type { ModelConfig } from './config.ts';
import { DataType, type GraphProto, type ModelProto, type NodeProto, type TensorProto } from '../onnx/proto.ts';

export interface TieResult {
  /** The head reads the embedding table (as written, or after the rewrite). */
  tied: boolean;
  /** The initializer removed by the rewrite (the exporter's copy), if any. */
  removed?: string;
  /** The embedding table the head reads once tied. */
  embedding?: string;
  /** How the removed copy held the table: as stored (`copy`, [vocab, hidden]) or transposed ([hidden, vocab]). */
  removedLayout?: 'copy' | 'transposed';
  /** Something the user should know (a tie the config disowns). */
  warning?: string;
}

/** Ops between the head and `logits` that act on each position alone. */
const PER_POSITION = new Set(['Cast', 'Mul', 'Div', 'Add', 'Sub', 'Tanh', 'Identity']);

function elementBytes(t: TensorProto): number {
  return t.dataType === DataType.FLOAT ? 4 : t.dataType === DataType.FLOAT16 || t.dataType === DataType.BFLOAT16 ? 2 : 0;
}

function words(t: TensorProto): Uint16Array | Uint32Array {
  const raw = t.rawData as Uint8Array;
  const size = elementBytes(t);
  const aligned = raw.byteOffset % size === 0 ? raw : raw.slice();
  return size === 4 ? new Uint32Array(aligned.buffer, aligned.byteOffset, aligned.length / 4) : new Uint16Array(aligned.buffer, aligned.byteOffset, aligned.length / 2);
}

/** b is a bit-equal copy of a ([rows, cols] both), or (transposed) a [rows, cols] and b [cols, rows] = aᵀ. */
function sameData(a: TensorProto, b: TensorProto, transposed: boolean): boolean {
  if (a.dataType !== b.dataType || !a.rawData || !b.rawData || a.rawData.length !== b.rawData.length) return false;
  const [rows, cols] = a.dims;
  if (transposed ? b.dims[0] !== cols || b.dims[1] !== rows : b.dims[0] !== rows || b.dims[1] !== cols) return false;
  const x = words(a);
  const y = words(b);
  if (!transposed) {
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
    return true;
  }
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) if (x[r * cols + c] !== y[c * rows + r]) return false;
  return true;
}

/** The embedding table: the 2-D float initializer a Gather reads `input_ids` from. */
function embedding(g: GraphProto, inits: Map<string, TensorProto>): TensorProto | undefined {
  const gather = g.node.find((n) => n.opType === 'Gather' && n.input[1] === 'input_ids' && inits.get(n.input[0])?.dims.length === 2);
  return gather ? inits.get(gather.input[0]) : undefined;
}

function attr(n: NodeProto, name: string): number | undefined {
  const a = n.attribute.find((x) => x.name === name);
  return a === undefined ? undefined : Number(a.type === 1 ? a.f : a.i);
}

/**
 * Finds the head's weight and, where it is the embedding (copied or transposed), rewrites the head to read
 * the embedding itself. Rewrites `model` in place; `file` names the graph in messages.
 */
export function tieHead(model: ModelProto, config: ModelConfig, file: string): TieResult {
  const g = model.graph;
  const inits = new Map(g.initializer.map((t) => [t.name, t]));
  const producer = new Map<string, NodeProto>();
  for (const n of g.node) for (const o of n.output) producer.set(o, n);
  const E = embedding(g, inits);
  let head = producer.get('logits');
  while (head && PER_POSITION.has(head.opType)) head = producer.get(head.input[0]);
  if (!E || !head || !['MatMul', 'FusedMatMul'].includes(head.opType)) return { tied: false };
  const config_ = config.tie_word_embeddings;
  const configJson = file.replace(/[^/\\]*$/, 'config.json');

  // the head's weight as it multiplies: W [hidden, vocab]; `source` is the initializer it comes from and
  // `transposed` whether that initializer is stored [vocab, hidden] (read through transB or a Transpose)
  const fusedTransB = head.opType === 'FusedMatMul' && attr(head, 'transB') === 1 && !attr(head, 'transA') && (attr(head, 'alpha') ?? 1) === 1;
  if (head.opType === 'FusedMatMul' && !fusedTransB && !inits.has(head.input[1])) return { tied: false };
  let source = inits.get(head.input[1]);
  let transposed = fusedTransB;
  let transposeNode: NodeProto | undefined;
  if (!source && head.opType === 'MatMul') {
    const t = producer.get(head.input[1]);
    const perm = t?.attribute.find((a) => a.name === 'perm')?.ints?.map(Number);
    if (t && t.opType === 'Transpose' && (!perm || (perm.length === 2 && perm[0] === 1 && perm[1] === 0)) && inits.has(t.input[0])) {
      transposeNode = t;
      source = inits.get(t.input[0]);
      transposed = true;
    }
  }
  if (!source || source.dims.length !== 2 || elementBytes(source) === 0) return { tied: false };

  let isTie: boolean;
  if (source === E) isTie = transposed; // the head reads the table itself
  else isTie = transposed ? sameData(E, source, false) : sameData(E, source, true);
  if (!isTie) {
    if (config_ === true) {
      throw new Error(`${configJson}: tie_word_embeddings is true, but the LM head in ${file} reads "${source.name}", which is not the embedding "${E.name}" nor its transpose; re-export the model, or set tie_word_embeddings to false to train the head as a weight of its own`);
    }
    return { tied: false };
  }
  if (source === E && !transposeNode) return { tied: true, embedding: E.name };
  if (config_ === false) {
    return {
      tied: false,
      warning: `${file}: the LM head "${source.name}" equals the embedding "${E.name}"${transposed ? '' : ' transposed'}, but ${configJson} says tie_word_embeddings: false, so they are trained as two weights (set it true to train one)`,
    };
  }
  // rewrite: FusedMatMul(x, E, transB = 1) in the head's place; the exporter's copy and Transpose go
  const fused: NodeProto = {
    name: `${head.name ?? 'lm_head'}/tied`,
    opType: 'FusedMatMul',
    domain: 'com.microsoft',
    input: [head.input[0], E.name],
    output: head.output,
    attribute: [
      { name: 'transB', type: 2, i: 1 },
      { name: 'alpha', type: 1, f: 1 },
    ],
  };
  g.node[g.node.indexOf(head)] = fused;
  const stillRead = (name: string) => g.node.some((n) => n.input.includes(name)) || g.output.some((o) => o.name === name);
  if (transposeNode && !stillRead(transposeNode.output[0])) g.node.splice(g.node.indexOf(transposeNode), 1);
  let removed: string | undefined;
  if (source !== E && !stillRead(source.name)) {
    g.initializer.splice(g.initializer.indexOf(source), 1);
    g.input = g.input.filter((i) => i.name !== source.name);
    removed = source.name;
  }
  if (!model.opsetImport.some((o) => o.domain === 'com.microsoft')) model.opsetImport.push({ domain: 'com.microsoft', version: 1 });
  // `transposed`: the head read its source through transB or a Transpose, so the source held E as stored
  return { tied: true, embedding: E.name, removed, ...(removed ? { removedLayout: transposed ? ('copy' as const) : ('transposed' as const) } : {}) };
}
