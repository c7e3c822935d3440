/**
 * The in-place KV cache rewrite: each layer's attention core, Concat(past, new) → scores → Softmax → ·V,
 * becomes onnxruntime's com.microsoft GroupQueryAttention over a past of fixed length, [batch, kvHeads,
 * buffer, headDim], which the decode loop owns and feeds every step (engine/generation/kv-layout.ts). The graph
 * returns a step's own keys and values (`kv_step.{i}.key|value`, [batch, kvHeads, sequence, headDim])
 * instead of the whole cache, and the loop writes them into its buffers at each row's slots: onnxruntime-node
 * reads a CPU input where it lies but copies every output into new Javascript memory (and a pre-allocated
 * output once more), so a present of the whole context cost a copy of the context per step; the kernel's
 * own present stays inside onnxruntime (docs/MODEL.md, "KV caches that grow in place").
 *
 * Row b's tokens sit at slots 0…n−1 without holes: GroupQueryAttention masks by length (`seqlens_k`, int32
 * [batch], the row's last slot written this run) and causality, not by an attention mask, so prompts are
 * right-padded (the padding's slots are overwritten by the tokens that follow) and `attention_mask` goes.
 * `total_sequence_length` (int32 scalar) is the longest row's slots after the run. Where logits-last.ts
 * cut the head to the last position, that Slice becomes a GatherND of each row's own last position, fed
 * as `logits_index` (int64 [batch, 1, 1]).
 *
 * The pattern recognised is the one build-decoder.ts emits (presets, built in memory or cached on disk):
 * per layer Concat(past_key_values.i.*, ·) → present.i.*, keys [Unsqueeze] → Transpose → MatMul(q, ·) →
 * Add(bias) → Softmax → MatMul(·, [Unsqueeze] values) → [Reshape] → Transpose → Reshape, q already scaled and
 * rotated. Anything else (exports, whose attention is written otherwise) is left unfused, with the reason. */
import { headDim, kvHeads, type ModelConfig } from './config.ts';
import { valueInfo } from '../onnx/graph-builder.ts';
import { AttributeType, bytesOf, DataType, type ModelProto, type NodeProto, type TensorProto } from '../onnx/proto.ts';

export type FusedAttention = { fused: true; model: ModelProto } | { fused: false; reason: string };

/** The fused graph's own inputs (besides input_ids, position_ids and the caches). */
export const SEQLENS_K = 'seqlens_k';
export const TOTAL_SEQUENCE_LENGTH = 'total_sequence_length';
export const LOGITS_INDEX = 'logits_index';
/** The graph output of layer i's keys or values of the tokens a run fed. */
export const stepOutput = (i: number, kv: 'key' | 'value') => `kv_step.${i}.${kv}`;

/** onnxruntime's CPU GroupQueryAttention takes head sizes that are multiples of 8 only. */
const HEAD_DIM_MULTIPLE = 8;

/** A new graph (the input's nodes and value infos are not changed; initializers are shared), or why not. */
export function fuseAttention(model: ModelProto, c: ModelConfig): FusedAttention {
  const H = c.num_attention_heads;
  const KV = kvHeads(c);
  const hd = headDim(c);
  if (hd % HEAD_DIM_MULTIPLE !== 0) return { fused: false, reason: `head_dim ${hd} is not a multiple of ${HEAD_DIM_MULTIPLE}, which onnxruntime's CPU GroupQueryAttention needs` };
  const g = model.graph;
  const past0 = g.input.find((i) => i.name === 'past_key_values.0.key');
  if (past0?.type?.tensorType?.elemType !== DataType.FLOAT) return { fused: false, reason: 'the KV caches are not float32' };

  const producer = new Map<string, NodeProto>();
  const consumers = new Map<string, NodeProto[]>();
  for (const n of g.node) {
    for (const o of n.output) producer.set(o, n);
    for (const i of n.input) consumers.set(i, [...(consumers.get(i) ?? []), n]);
  }
  /** The one node reading `name` (graph outputs aside), when it is of `opType`. */
  const only = (name: string, opType: string): NodeProto | undefined => {
    const c = consumers.get(name) ?? [];
    return c.length === 1 && c[0].opType === opType ? c[0] : undefined;
  };
  const through = (name: string, opType: string): string => {
    const n = only(name, opType);
    return n ? n.output[0] : name;
  };
  const ints = (n: NodeProto, attr: string) => n.attribute.find((a) => a.name === attr)?.ints?.map(Number);

  const added: TensorProto[] = [];
  const shapeConst = (name: string, values: number[]) => {
    added.push({ name, dims: [values.length], dataType: DataType.INT64, rawData: bytesOf(BigInt64Array.from(values.map(BigInt))) });
    return name;
  };
  const qShape = shapeConst('/gqa/query_shape', [0, 0, H * hd]);
  const kvShape = shapeConst('/gqa/kv_shape', [0, 0, KV * hd]);
  const removed = new Set<NodeProto>();
  /** New nodes to insert before the node they replace. */
  const before = new Map<NodeProto, NodeProto[]>();

  for (let i = 0; i < c.num_hidden_layers; i++) {
    const why = (what: string): FusedAttention => ({ fused: false, reason: `layer ${i}: ${what} (the attention is not in the form build-decoder.ts emits)` });
    const concat = (kv: 'key' | 'value') => {
      const n = producer.get(`present.${i}.${kv}`);
      return n?.opType === 'Concat' && n.input[0] === `past_key_values.${i}.${kv}` && n.input.length === 2 ? n : undefined;
    };
    const ck = concat('key');
    const cv = concat('value');
    if (!ck || !cv) return why(`present.${i}.key|value is not Concat(past_key_values.${i}.key|value, new)`);
    const kt = only(through(ck.output[0], 'Unsqueeze'), 'Transpose');
    const scores = kt && only(kt.output[0], 'MatMul');
    if (!scores || scores.input[1] !== kt.output[0]) return why('the keys do not reach one MatMul through a Transpose');
    const masked = only(scores.output[0], 'Add');
    const softmax = masked && only(masked.output[0], 'Softmax');
    const context = softmax && only(softmax.output[0], 'MatMul');
    const values = through(cv.output[0], 'Unsqueeze');
    if (!context || context.input[1] !== values || only(values, 'MatMul') !== context) return why('the scores do not reach MatMul(Softmax(scores + bias), values)');
    const heads = through(context.output[0], 'Reshape');
    const transposed = only(heads, 'Transpose');
    const merged = transposed && only(transposed.output[0], 'Reshape');
    if (!merged || ints(transposed, 'perm')?.join() !== '0,2,1,3') return why('the context is not merged by Transpose(0,2,1,3) → Reshape');
    const qs = producer.get(scores.input[0]);
    const q = qs?.opType === 'Reshape' && H !== KV ? qs.input[0] : scores.input[0];

    const id = `/gqa/layer${i}`;
    const toBsh = (x: string, shape: string, what: string): NodeProto[] => [
      { name: `${id}/${what}_transpose`, opType: 'Transpose', domain: '', input: [x], output: [`${id}/${what}_bsnh`], attribute: [{ name: 'perm', type: AttributeType.INTS, ints: [0, 2, 1, 3] }] },
      { name: `${id}/${what}_reshape`, opType: 'Reshape', domain: '', input: [`${id}/${what}_bsnh`, shape], output: [`${id}/${what}`], attribute: [] },
    ];
    const gqa: NodeProto = {
      name: `${id}/GroupQueryAttention`,
      opType: 'GroupQueryAttention',
      domain: 'com.microsoft',
      input: [`${id}/query`, `${id}/key`, `${id}/value`, `past_key_values.${i}.key`, `past_key_values.${i}.value`, SEQLENS_K, TOTAL_SEQUENCE_LENGTH],
      // the kernel's present (the past with this run's tokens) stays inside onnxruntime
      output: [merged.output[0], `${id}/present_key`, `${id}/present_value`],
      // q arrives scaled by 1/√head_dim already
      attribute: [
        { name: 'num_heads', type: AttributeType.INT, i: H },
        { name: 'kv_num_heads', type: AttributeType.INT, i: KV },
        { name: 'scale', type: AttributeType.FLOAT, f: 1 },
      ],
    };
    const step = (x: string, kv: 'key' | 'value'): NodeProto => ({ name: `${id}/${kv}_step`, opType: 'Identity', domain: '', input: [x], output: [stepOutput(i, kv)], attribute: [] });
    before.set(merged, [...toBsh(q, qShape, 'query'), ...toBsh(ck.input[1], kvShape, 'key'), ...toBsh(cv.input[1], kvShape, 'value'), gqa, step(ck.input[1], 'key'), step(cv.input[1], 'value')]);
    removed.add(merged);
    removed.add(ck);
    removed.add(cv);
  }

  // the head at each row's own last position: Slice(−1) cannot pick a different position per row
  let logitsIndex = false;
  const slice = g.node.find((n) => n.name === '/logits_last/Slice');
  if (slice) {
    removed.add(slice);
    before.set(slice, [{ name: '/gqa/logits_last/GatherND', opType: 'GatherND', domain: '', input: [slice.input[0], LOGITS_INDEX], output: [slice.output[0]], attribute: [{ name: 'batch_dims', type: AttributeType.INT, i: 1 }] }]);
    logitsIndex = true;
  }

  const nodes = g.node.flatMap((n) => [...(before.get(n) ?? []), ...(removed.has(n) ? [] : [n])]);
  const isCache = (name: string) => /^(past_key_values|present)\.\d+\.(key|value)$/.test(name);
  const outputs = [
    ...g.output.filter((o) => !isCache(o.name)),
    ...Array.from({ length: c.num_hidden_layers }, (_, i) => (['key', 'value'] as const).map((kv) => valueInfo(stepOutput(i, kv), DataType.FLOAT, ['batch_size', KV, 'sequence_length', hd]))).flat(),
  ];
  const live = liveNodes(nodes, new Set(outputs.map((o) => o.name)));
  const read = new Set(live.flatMap((n) => n.input));
  if (read.has('attention_mask')) return { fused: false, reason: 'attention_mask is read outside the attention bias' };
  const cacheDims = (name: string) => valueInfo(name, DataType.FLOAT, ['batch_size', KV, 'buffer_length', hd]);
  return {
    fused: true,
    model: {
      ...model,
      opsetImport: model.opsetImport.some((o) => o.domain === 'com.microsoft') ? model.opsetImport : [...model.opsetImport, { domain: 'com.microsoft', version: 1 }],
      graph: {
        ...g,
        node: live,
        initializer: [...g.initializer.filter((t) => read.has(t.name)), ...added],
        input: [
          ...g.input.filter((x) => read.has(x.name)).map((x) => (isCache(x.name) ? cacheDims(x.name) : x)),
          valueInfo(SEQLENS_K, DataType.INT32, ['batch_size']),
          valueInfo(TOTAL_SEQUENCE_LENGTH, DataType.INT32, []),
          ...(logitsIndex ? [valueInfo(LOGITS_INDEX, DataType.INT64, ['batch_size', 1, 1])] : []),
        ],
        output: outputs,
        valueInfo: [],
      },
    },
  };
}

/** The nodes some graph output depends on, in their order. */
function liveNodes(nodes: readonly NodeProto[], outputs: ReadonlySet<string>): NodeProto[] {
  const needed = new Set(outputs);
  const keep = new Set<NodeProto>();
  for (let k = nodes.length - 1; k >= 0; k--) {
    const n = nodes[k];
    if (!n.output.some((o) => needed.has(o))) continue;
    keep.add(n);
    for (const i of n.input) needed.add(i);
  }
  return nodes.filter((n) => keep.has(n));
}
