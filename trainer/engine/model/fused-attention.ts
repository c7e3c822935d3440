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
 * The attention is recognised by its structure, not by node names, per layer, from the graph outputs
 * `present.i.key|value` = Concat(past_key_values.i.key|value, new) on the sequence axis:
 * - keys: present.key → [repeat] → Transpose (the last two axes swapped) → [Mul by a scalar constant] → the scores'
 *   MatMul(q, ·), where [repeat] is transformers' repeat_kv as exported, Unsqueeze(axis 2) → Expand → Reshape,
 *   or build-decoder.ts's Unsqueeze(axis 2) (q then Reshaped to [B,KV,G,S,hd], broadcast over the group);
 * - scores → any of Mul / Div by a scalar constant (the scale), Cast to float, one Add of a mask → Softmax over
 *   the last axis → [Cast to float, Identity] → MatMul(·, values), values = present.value → [repeat];
 * - the context → [Reshape back to 4-D, for build-decoder.ts's group form] → Transpose(0,2,1,3) → Reshape to 3-D.
 * That is build-decoder.ts's form (presets) and what torch.onnx.export (TorchScript, opsets 14–17) writes for
 * transformers' eager Llama / Mistral / Qwen2 / Qwen3 attention (and optimum, which exports through it). The
 * query is whatever reaches the scores' first input (rotary, q-norm, a scale folded into q are all upstream of
 * it and stay as they are); the scalar factors on the key side and on the scores are multiplied into the
 * kernel's `scale`. Invariants the match keeps: repeat_kv by Unsqueeze at axis 2 is key-head-major (query head
 * h reads KV head ⌊h / (H/KV)⌋), as GroupQueryAttention reads it; the mask added to the scores is computed
 * from attention_mask, position_ids and shapes only (never from the hidden state, θ or the cached values, and
 * without a table of values or a cumulative term such as ALiBi's), and is taken to be a decoder's causal and
 * padding mask, which the kernel applies by seqlens_k (a bidirectional mask would not be told apart); after the rewrite no live node reads a cache input other than the kernel, nor a
 * removed value (a past length read from a cache's shape would be the buffer's). Anything else (a softcap
 * between the scores and the Softmax, attention without a mask, a fused QKV layout the exporter wrote
 * otherwise) is left unfused, with the reason. */
import { headDim, kvHeads, type ModelConfig } from './config.ts';
import { valueInfo } from '../onnx/graph-builder.ts';
import { AttributeType, bytesOf, DataType, tensorValues, type ModelProto, type NodeProto, type TensorProto } from '../onnx/proto.ts';

export type FusedAttention = { fused: true; model: ModelProto } | { fused: false; reason: string };

/** The fused graph's own inputs (besides input_ids, position_ids and the caches). */
export const SEQLENS_K = 'seqlens_k';
export const TOTAL_SEQUENCE_LENGTH = 'total_sequence_length';
export const LOGITS_INDEX = 'logits_index';
/** The graph output of layer i's keys or values of the tokens a run fed. */
export const stepOutput = (i: number, kv: 'key' | 'value') => `kv_step.${i}.${kv}`;

/** onnxruntime's CPU GroupQueryAttention takes head sizes that are multiples of 8 only. */
const HEAD_DIM_MULTIPLE = 8;

/** Layer i's attention as matched: the nodes it reads from and the one whose output it replaces. */
interface AttentionMatch {
  /** The Concats that make present.i.key|value. */
  ck: NodeProto;
  cv: NodeProto;
  /** The query, [B, H, S, hd]. */
  q: string;
  /** The product of the scalar factors between the keys / the scores and the Softmax. */
  scale: number;
  /** The Reshape whose 3-D output [B, S, H·hd] the kernel's output takes over. */
  merged: NodeProto;
}

/** A new graph (the input's nodes and value infos are not changed; initializers are shared), or why not. */
export function fuseAttention(model: ModelProto, c: ModelConfig): FusedAttention {
  const H = c.num_attention_heads;
  const KV = kvHeads(c);
  const hd = headDim(c);
  if (hd % HEAD_DIM_MULTIPLE !== 0) return { fused: false, reason: `head_dim ${hd} is not a multiple of ${HEAD_DIM_MULTIPLE}, which onnxruntime's CPU GroupQueryAttention needs` };
  if (H % KV !== 0) return { fused: false, reason: `num_attention_heads ${H} is not a multiple of num_key_value_heads ${KV}` };
  const g = model.graph;
  const past0 = g.input.find((i) => i.name === 'past_key_values.0.key');
  if (past0?.type?.tensorType?.elemType !== DataType.FLOAT) return { fused: false, reason: 'the KV caches are not float32' };

  const graph = new GraphIndex(model);
  const matches: AttentionMatch[] = [];
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const m = matchLayer(graph, i, H, KV, hd);
    if (typeof m === 'string') return { fused: false, reason: `layer ${i}: ${m} (the attention is not in a form the rewrite knows: build-decoder.ts's, or torch.onnx.export's of transformers' eager attention)` };
    matches.push(m);
  }

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

  matches.forEach(({ ck, cv, q, scale, merged }, i) => {
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
      // the scores' own factors (1 where q arrives scaled, as build-decoder.ts writes it)
      attribute: [
        { name: 'num_heads', type: AttributeType.INT, i: H },
        { name: 'kv_num_heads', type: AttributeType.INT, i: KV },
        { name: 'scale', type: AttributeType.FLOAT, f: scale },
      ],
    };
    const step = (x: string, kv: 'key' | 'value'): NodeProto => ({ name: `${id}/${kv}_step`, opType: 'Identity', domain: '', input: [x], output: [stepOutput(i, kv)], attribute: [] });
    before.set(merged, [...toBsh(q, qShape, 'query'), ...toBsh(ck.input[1], kvShape, 'key'), ...toBsh(cv.input[1], kvShape, 'value'), gqa, step(ck.input[1], 'key'), step(cv.input[1], 'value')]);
    removed.add(merged);
    removed.add(ck);
    removed.add(cv);
  });

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
  // the buffers fed as the past are longer than the past: only the kernel may read them
  const pastReader = live.find((n) => n.opType !== 'GroupQueryAttention' && n.input.some((x) => /^past_key_values\./.test(x)));
  if (pastReader) return { fused: false, reason: `${describe(pastReader)} reads a past cache besides the attention (e.g. a past length from its shape), which the in-place buffers would change` };
  const made = new Set([...g.input.map((x) => x.name), ...g.initializer.map((t) => t.name), ...added.map((t) => t.name), SEQLENS_K, TOTAL_SEQUENCE_LENGTH, LOGITS_INDEX, '']);
  for (const n of live) n.output.forEach((o) => made.add(o));
  const orphan = live.find((n) => n.input.some((x) => !made.has(x)));
  if (orphan) return { fused: false, reason: `${describe(orphan)} reads ${orphan.input.find((x) => !made.has(x))}, which the rewrite removes` };
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

const describe = (n: NodeProto) => `${n.opType} node${n.name ? ` "${n.name}"` : ''}`;

/** Producers, consumers and constants of a graph, for matching by structure. */
class GraphIndex {
  readonly producer = new Map<string, NodeProto>();
  readonly consumers = new Map<string, NodeProto[]>();
  readonly initializers = new Map<string, TensorProto>();
  readonly inputs: ReadonlySet<string>;
  /** The default domain's opset (Softmax's default axis and Unsqueeze's axes moved at 13). */
  readonly opset: number;

  constructor(model: ModelProto) {
    for (const n of model.graph.node) {
      for (const o of n.output) this.producer.set(o, n);
      for (const i of n.input) this.consumers.set(i, [...(this.consumers.get(i) ?? []), n]);
    }
    for (const t of model.graph.initializer) this.initializers.set(t.name, t);
    this.inputs = new Set(model.graph.input.map((x) => x.name));
    this.opset = model.opsetImport.find((o) => o.domain === '' || o.domain === 'ai.onnx')?.version ?? 0;
  }

  /** The one node reading `name` for its data (Shape nodes, which read only its dims, aside), if any. */
  reader(name: string): NodeProto | undefined {
    const c = (this.consumers.get(name) ?? []).filter((n) => n.opType !== 'Shape');
    return c.length === 1 ? c[0] : undefined;
  }

  /** A constant tensor: an initializer or a Constant node's value. */
  constant(name: string): TensorProto | undefined {
    const t = this.initializers.get(name);
    if (t) return t;
    const n = this.producer.get(name);
    return n?.opType === 'Constant' ? n.attribute.find((a) => a.name === 'value')?.t : undefined;
  }

  /** A float constant of one element, as a number. */
  scalar(name: string): number | undefined {
    const t = this.constant(name);
    if (!t || t.dims.reduce((a, b) => a * b, 1) !== 1) return undefined;
    if (t.dataType === DataType.FLOAT) return tensorValues(t)[0] as number;
    if (t.dataType === DataType.DOUBLE) return t.rawData?.length ? new DataView(t.rawData.buffer, t.rawData.byteOffset).getFloat64(0, true) : t.doubleData?.[0];
    return undefined;
  }

  /** An integer constant's elements. */
  ints(name: string): number[] | undefined {
    const t = this.constant(name);
    return t && (t.dataType === DataType.INT64 || t.dataType === DataType.INT32) ? Array.from(tensorValues(t), Number) : undefined;
  }

  attr(n: NodeProto, name: string) {
    return n.attribute.find((a) => a.name === name);
  }

  /** Unsqueeze's axes (an attribute before opset 13, an input from it). */
  unsqueezeAxes(n: NodeProto): number[] | undefined {
    return n.input[1] ? this.ints(n.input[1]) : this.attr(n, 'axes')?.ints?.map(Number);
  }

  /**
   * The positive factor a Mul or Div by a scalar applies to its other input `x`, or undefined: a constant, or
   * a scalar computed from constants and the last dim of tensors known to end in head_dim (`lastDims`), as
   * torch's decomposition of scaled_dot_product_attention computes its default scale from Shape(query).
   */
  factor(n: NodeProto, x: string, lastDims: ReadonlyMap<string, number> = new Map()): number | undefined {
    let f: number | undefined;
    if (n.opType === 'Mul' && n.input.length === 2 && n.input.includes(x)) f = this.evaluate(n.input[0] === x ? n.input[1] : n.input[0], lastDims);
    if (n.opType === 'Div' && n.input[0] === x) {
      const d = this.evaluate(n.input[1], lastDims);
      f = d === undefined ? undefined : 1 / d;
    }
    // a positive factor commutes with the mask's large negative terms and the Softmax's max
    return f !== undefined && f > 0 && Number.isFinite(f) ? f : undefined;
  }

  /** A one-element value from constants, arithmetic and the last dims in `lastDims`, or undefined. */
  evaluate(name: string, lastDims: ReadonlyMap<string, number>, depth = 0): number | undefined {
    const c = this.scalar(name);
    if (c !== undefined) return c;
    const ints = this.ints(name);
    if (ints) return ints.length === 1 ? ints[0] : undefined;
    const n = this.producer.get(name);
    if (!n || depth > 12) return undefined;
    const ev = (k: number) => (n.input[k] ? this.evaluate(n.input[k], lastDims, depth + 1) : undefined);
    const two = (op: (a: number, b: number) => number) => {
      const [a, b] = [ev(0), ev(1)];
      return a === undefined || b === undefined ? undefined : op(a, b);
    };
    /** Shape(t)'s last element, where t is known to end in head_dim. */
    const lastOfShape = (shape: string, index: number | undefined) => {
      const s = this.producer.get(shape);
      if (s?.opType !== 'Shape' || s.attribute.length > 0 || index !== -1) return undefined;
      return lastDims.get(s.input[0]);
    };
    switch (n.opType) {
      case 'Identity':
      case 'Squeeze':
      case 'Unsqueeze':
      case 'Reshape':
        return ev(0);
      case 'Cast': {
        const v = ev(0);
        const to = this.attr(n, 'to')?.i;
        return v === undefined ? undefined : to === DataType.FLOAT || to === DataType.DOUBLE || to === DataType.FLOAT16 ? v : Math.trunc(v);
      }
      case 'Sqrt': {
        const v = ev(0);
        return v === undefined || v < 0 ? undefined : Math.sqrt(v);
      }
      case 'Reciprocal': {
        const v = ev(0);
        return v === undefined || v === 0 ? undefined : 1 / v;
      }
      case 'Mul':
        return two((a, b) => a * b);
      case 'Div':
        return two((a, b) => a / b);
      case 'Add':
        return two((a, b) => a + b);
      case 'Sub':
        return two((a, b) => a - b);
      case 'Gather': {
        const index = this.ints(n.input[1]);
        return index?.length === 1 ? lastOfShape(n.input[0], index[0]) : undefined;
      }
      case 'Slice': {
        // Slice(Shape(t), starts [-1], ends [INT64_MAX]) on axis 0, step 1: the last dim, one element
        const [starts, ends] = [this.ints(n.input[1]), this.ints(n.input[2])];
        const rest = n.input.slice(3).map((x) => this.ints(x));
        const one = starts?.join() === '-1' && ends?.length === 1 && ends[0] >= 2 ** 31 - 1 && rest.every((v) => v?.join() === '0' || v?.join() === '1');
        return one ? lastOfShape(n.input[0], -1) : undefined;
      }
      default:
        return undefined;
    }
  }

  isFloatCast(n: NodeProto): boolean {
    return n.opType === 'Cast' && this.attr(n, 'to')?.i === DataType.FLOAT;
  }
}

/** Layer i's attention core, or why it does not match. */
function matchLayer(graph: GraphIndex, i: number, H: number, KV: number, hd: number): AttentionMatch | string {
  const concat = (kv: 'key' | 'value') => {
    const n = graph.producer.get(`present.${i}.${kv}`);
    const axis = n && graph.attr(n, 'axis')?.i;
    return n?.opType === 'Concat' && n.input.length === 2 && n.input[0] === `past_key_values.${i}.${kv}` && (axis === 2 || axis === -2) ? n : undefined;
  };
  const ck = concat('key');
  const cv = concat('value');
  if (!ck || !cv) return `present.${i}.key|value is not Concat(past_key_values.${i}.key|value, new) on the sequence axis`;

  /** present → [repeat]: where the cache's data goes next, and whether build-decoder.ts's group axis was added. */
  const repeat = (x: string): { at: string; grouped: boolean } | string => {
    const u = graph.reader(x);
    // without a repeat each query head needs its own KV head (a query folded otherwise would be misread)
    if (u?.opType !== 'Unsqueeze') return H === KV ? { at: x, grouped: false } : `the cache is not repeated to the ${H} query heads (${KV} KV heads)`;
    if (graph.unsqueezeAxes(u)?.join() !== '2') return `${describe(u)} adds an axis other than 2 to the cache`;
    const e = graph.reader(u.output[0]);
    if (e?.opType !== 'Expand') return { at: u.output[0], grouped: true };
    const r = graph.reader(e.output[0]);
    if (r?.opType !== 'Reshape') return `${describe(e)} of the cache is not followed by a Reshape (repeat_kv)`;
    return { at: r.output[0], grouped: false };
  };

  // keys: [repeat] → Transpose(last two) → [Mul by a constant] → MatMul(q, ·)
  const keys = repeat(ck.output[0]);
  if (typeof keys === 'string') return keys;
  let scale = 1;
  let at = keys.at;
  const kt = graph.reader(at);
  const perm = kt && graph.attr(kt, 'perm')?.ints?.map(Number);
  const rank = keys.grouped ? 5 : 4;
  const swapLast = Array.from({ length: rank }, (_, k) => (k < rank - 2 ? k : 2 * rank - 3 - k)).join();
  if (kt?.opType !== 'Transpose' || perm?.join() !== swapLast) return 'the keys do not reach the scores through a Transpose of their last two axes';
  at = kt.output[0];
  /** Mul / Div nodes on the keys after the Transpose, evaluated once the query is known. */
  const keyScales: Array<{ node: NodeProto; x: string }> = [];
  let scores = graph.reader(at);
  while (scores && ((scores.opType === 'Mul' && scores.input.length === 2 && scores.input.includes(at)) || (scores.opType === 'Div' && scores.input[0] === at))) {
    keyScales.push({ node: scores, x: at });
    at = scores.output[0];
    scores = graph.reader(at);
  }
  if (scores?.opType !== 'MatMul' || scores.input[1] !== at) return 'the keys do not reach one MatMul(q, keysᵀ)';
  // what ends in head_dim: the new keys, and the query as the scores read it, back through its own scaling
  const lastDims = new Map<string, number>([[ck.input[1], hd]]);
  for (let x: string | undefined = scores.input[0], k = 0; x && k < 4; k++) {
    lastDims.set(x, hd);
    const p = graph.producer.get(x);
    if (p?.opType === 'Mul') p.input.forEach((y) => lastDims.set(y, hd));
    x = p && (p.opType === 'Mul' || p.opType === 'Div' || graph.isFloatCast(p)) ? p.input[0] : undefined;
  }
  for (const { node, x } of keyScales) {
    const f = graph.factor(node, x, lastDims);
    if (f === undefined) return `${describe(node)} scales the keys by something other than a positive scalar the rewrite can evaluate`;
    scale *= f;
  }

  // scores → [scale, Cast] + Add(mask) → Softmax(last axis) → [Cast, Identity] → MatMul(·, values)
  at = scores.output[0];
  let mask: string | undefined;
  let softmax: NodeProto | undefined;
  let context: NodeProto | undefined;
  for (let n = graph.reader(at); n; n = graph.reader(at)) {
    const f = softmax ? undefined : graph.factor(n, at, lastDims);
    if (f !== undefined) scale *= f;
    else if (graph.isFloatCast(n) || (softmax && n.opType === 'Identity')) {
      // a dtype no-op (the exporter's float32 softmax, cast back)
    } else if (!softmax && !mask && n.opType === 'Add' && n.input.length === 2) mask = n.input[0] === at ? n.input[1] : n.input[0];
    else if (!softmax && n.opType === 'Softmax') {
      const axis = graph.attr(n, 'axis')?.i ?? (graph.opset >= 13 ? -1 : 1);
      if (axis !== -1 && axis !== rank - 1) return `${describe(n)} is not over the keys (axis ${axis})`;
      softmax = n;
    } else if (softmax && n.opType === 'MatMul' && n.input[0] === at) {
      context = n;
      break;
    } else return `${describe(n)} between the scores and the context is not a scale, a mask or the Softmax`;
    at = n.output[0];
  }
  if (!softmax || !context) return 'the scores do not reach MatMul(Softmax(scores), values)';
  if (!mask) return 'no mask is added to the scores (the kernel is causal, so unmasked attention would change)';
  const why = maskInputs(graph, mask);
  if (why) return why;
  const values = repeat(cv.output[0]);
  if (typeof values === 'string') return values;
  if (values.grouped !== keys.grouped || context.input[1] !== values.at || graph.reader(values.at) !== context) return 'the values do not reach the same MatMul(Softmax(scores), values)';

  // the context back to [B, S, H·hd]
  let heads = context.output[0];
  if (keys.grouped) {
    const r = graph.reader(heads);
    if (r?.opType !== 'Reshape') return 'the grouped context is not Reshaped back to [B, H, S, hd]';
    heads = r.output[0];
  }
  const transposed = graph.reader(heads);
  const merged = transposed && graph.reader(transposed.output[0]);
  if (transposed?.opType !== 'Transpose' || graph.attr(transposed, 'perm')?.ints?.join() !== '0,2,1,3' || merged?.opType !== 'Reshape') return 'the context is not merged by Transpose(0,2,1,3) → Reshape';
  const target = graph.producer.get(merged.input[1]);
  const targetRank = target?.opType === 'Concat' ? target.input.length : graph.ints(merged.input[1])?.length;
  if (targetRank !== 3) return `the context is not merged to [batch, sequence, heads × head_dim] (${describe(merged)})`;

  // the query as the scores read it; build-decoder.ts's group form reads it Reshaped to [B, KV, G, S, hd]
  let q = scores.input[0];
  if (keys.grouped) {
    const r = graph.producer.get(q);
    if (r?.opType !== 'Reshape') return 'the grouped scores do not read q Reshaped to [B, KV, G, S, hd]';
    q = r.input[0];
  }
  return { ck, cv, q, scale: Math.fround(scale), merged };
}

/**
 * Undefined when the mask is computed from attention_mask, position_ids, shapes and scalar constants only; else
 * why not. Such a mask is taken to be a decoder's causal and padding mask, which the kernel applies by
 * seqlens_k; a bidirectional one, or a window narrower than the served context (config.ts caps the context at
 * sliding_window), would not be told apart by structure.
 */
function maskInputs(graph: GraphIndex, mask: string): string | undefined {
  const seen = new Set<string>();
  const stack = [mask];
  while (stack.length) {
    const x = stack.pop()!;
    if (seen.has(x) || x === '') continue;
    seen.add(x);
    // a float constant of more than one element is a table of values: a learned or positional bias
    const t = graph.constant(x);
    if (t) {
      if ((t.dataType === DataType.FLOAT || t.dataType === DataType.FLOAT16 || t.dataType === DataType.DOUBLE) && t.dims.reduce((a, b) => a * b, 1) > 1) return `the mask added to the scores reads the float tensor ${x} (a learned or positional bias, not a causal mask)`;
      continue;
    }
    if (graph.inputs.has(x)) {
      if (x !== 'attention_mask' && x !== 'position_ids') return `the mask added to the scores reads ${x}`;
      continue;
    }
    const n = graph.producer.get(x);
    if (!n) return `the mask added to the scores reads ${x}, which nothing makes`;
    // a shape says nothing of its tensor's values, nor a filled tensor of its size
    if (n.opType === 'Shape' || n.opType === 'ConstantOfShape') continue;
    if (n.opType === 'CumSum') return `the mask added to the scores has a cumulative term (${describe(n)}), as ALiBi's positions do`;
    stack.push(...n.input);
  }
  return undefined;
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
