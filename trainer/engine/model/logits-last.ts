/**
 * Prefill reads the logits of each row's last position only (rows are left-padded, so that is the last
 * column), so the LM head is computed there alone: a Slice of the last position goes in front of the head's
 * MatMul, and `logits` becomes [batch, 1, vocab]. Without it a prefill's logits are prompt × vocabulary
 * floats per row (0.6 GB for one 1,000-token row at 151,936 tokens).
 */
import { bytesOf, DataType, type ModelProto, type NodeProto } from '../onnx/proto.ts';

/** Ops between the head's MatMul and `logits` that act on each position alone (casts, softcapping). */
const PER_POSITION = new Set(['Cast', 'Mul', 'Div', 'Add', 'Sub', 'Tanh', 'Identity']);
const HEADS = new Set(['MatMul', 'FusedMatMul']);

/** Rewrites `model` in place; returns false (graph unchanged) when no head MatMul is found before `logits`. */
export function logitsAtLastPosition(model: ModelProto): boolean {
  const g = model.graph;
  const producer = new Map<string, NodeProto>();
  for (const n of g.node) for (const o of n.output) producer.set(o, n);
  let node = producer.get('logits');
  while (node && !HEADS.has(node.opType) && PER_POSITION.has(node.opType)) node = producer.get(node.input[0]);
  if (!node || !HEADS.has(node.opType)) return false;
  const head = node;
  const int64 = (name: string, v: bigint) => g.initializer.push({ name, dims: [1], dataType: DataType.INT64, rawData: bytesOf(BigInt64Array.of(v)) });
  int64('/logits_last/starts', -1n);
  int64('/logits_last/ends', 2n ** 63n - 1n);
  int64('/logits_last/axes', 1n);
  const sliced = '/logits_last/hidden';
  const slice: NodeProto = { name: '/logits_last/Slice', opType: 'Slice', domain: '', input: [head.input[0], '/logits_last/starts', '/logits_last/ends', '/logits_last/axes'], output: [sliced], attribute: [] };
  head.input = [sliced, ...head.input.slice(1)];
  g.node.splice(g.node.indexOf(head), 0, slice);
  const out = g.output.find((o) => o.name === 'logits');
  const dims = out?.type?.tensorType?.shape?.dim;
  if (dims && dims.length === 3) dims[1] = { dimValue: 1 };
  return true;
}
