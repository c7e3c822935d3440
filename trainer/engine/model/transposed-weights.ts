/**
 * Weights read through a Transpose become MatMul weights of their own. PyTorch's exporter without constant
 * folding (`do_constant_folding=False`) writes every nn.Linear as MatMul(x, Transpose(weight [out, in]));
 * low-rank mode perturbs MatMul weights only, so those weights would silently stay unperturbed. At load
 * the initializer is stored transposed ([in, out], what constant folding writes) and the MatMuls read it
 * directly; the graph computes the same, and θ holds the same elements under the same name.
 */
import { DataType, type ModelProto, type NodeProto } from '../onnx/proto.ts';

const ELEMENT_BYTES: Record<number, number> = { [DataType.FLOAT]: 4, [DataType.FLOAT16]: 2 };

function isPlainTranspose(n: NodeProto): boolean {
  const perm = n.attribute.find((a) => a.name === 'perm')?.ints?.map(Number);
  return n.opType === 'Transpose' && (n.domain ?? '') === '' && (!perm || (perm.length === 2 && perm[0] === 1 && perm[1] === 0));
}

/** Folds Transpose(W) into W where W is a 2-D float initializer read only by that Transpose, and the Transpose only by MatMuls' weight slot. Returns the folded names. */
export function foldWeightTransposes(model: ModelProto): string[] {
  const g = model.graph;
  const inits = new Map(g.initializer.map((t) => [t.name, t]));
  const readers = new Map<string, Array<{ node: NodeProto; slot: number }>>();
  for (const node of g.node) node.input.forEach((name, slot) => readers.set(name, [...(readers.get(name) ?? []), { node, slot }]));
  const outputs = new Set(g.output.map((o) => o.name));
  const folded: string[] = [];
  for (const t of [...g.node]) {
    const w = inits.get(t.input[0]);
    if (!isPlainTranspose(t) || !w || w.dims.length !== 2 || !ELEMENT_BYTES[w.dataType] || !w.rawData) continue;
    const uses = readers.get(t.output[0]) ?? [];
    if ((readers.get(w.name) ?? []).length !== 1 || outputs.has(t.output[0]) || uses.length === 0) continue;
    if (!uses.every((u) => u.node.opType === 'MatMul' && (u.node.domain ?? '') === '' && u.slot === 1)) continue;
    const size = ELEMENT_BYTES[w.dataType];
    const [rows, cols] = w.dims;
    const src = w.rawData;
    const dst = new Uint8Array(src.length);
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) dst.set(src.subarray((r * cols + c) * size, (r * cols + c + 1) * size), (c * rows + r) * size);
    w.rawData = dst;
    w.dims = [cols, rows];
    // a declared shape of the initializer (an older exporter lists initializers as graph inputs) follows
    for (const v of [...g.input, ...g.valueInfo]) if (v.name === w.name) v.type?.tensorType?.shape?.dim.reverse();
    for (const u of uses) u.node.input[1] = w.name;
    g.node.splice(g.node.indexOf(t), 1);
    folded.push(w.name);
  }
  return folded;
}
