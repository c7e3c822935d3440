/**
 * Batched autoregressive decoding with a KV cache over any decoder with the HF/optimum IO names. One
 * prefill pass, then one token per row per step, position ids counted over real tokens only. Where the
 * keys and values live between steps is kv-layout.ts's: `present.*` fed back as `past_key_values.*` with
 * left-padded prompts (the exported form), or one buffer a cache written in place with right-padded prompts
 * (engine/model/fused-attention.ts's form, recognised by its `seqlens_k` input). Rows stop on an
 * end-of-sequence token, a stop string, their token budget or their abort signal. A row with `onText` gets
 * its completion in pieces as it is decoded (see text-stream.ts), the last piece when it finishes.
 *
 * A row may bring the K/V of its prompt's first p tokens (`prefix`, from prefix-cache.ts): only the rest
 * of each prompt is prefilled (kv-layout.ts places the prefixes). A row with `keep` receives, after
 * decoding, the K/V of every token it fed with its true input (prompt and completion, never the padding
 * fed once it finished). kv-blocks.ts checks the one and gathers the other.
 *
 * On the webgpu route (`device`, device-tensors.ts; the exported form only) the caches stay on the device
 * from step to step, the extra inputs go up once a batch, and finished rows leave the batch there.
 */
import * as ort from 'onnxruntime-node';
import type { TextCodec } from './text-codec.ts';
import type { FinishReason, GenerateResult, SamplingOptions, StepTransfer } from '../engine.ts';
import type { DeviceTensors } from './device-tensors.ts';
import { IncrementalText } from './incremental-text.ts';
import { sampleToken } from './sampler.ts';
import { TextStream } from './text-stream.ts';
import type { TokenConstraint } from './token-constraint.ts';
import type { KvBlock, PrefixHit } from './prefix-cache.ts';
import { cachedLength, keepRows } from './kv-blocks.ts';
import { ConcatCache, InPlaceCache, type KvLayout } from './kv-layout.ts';
import { fromHalf } from '../onnx/half.ts';

export interface DecoderShape {
  layers: number;
  kvHeads: number;
  headDim: number;
  vocabSize: number;
  /** Ids 0..sampleable−1 can be sampled (default all): rows past the tokenizer's vocabulary (padding) never are. */
  sampleable?: number;
  hasPositionIds: boolean;
  /** The KV caches' dtype (an fp16 export's); fp32 by default. Logits are read as they come, fp32 or fp16. */
  kvType?: 'float32' | 'float16';
}

export interface PreparedRow {
  promptIds: number[];
  sampling: SamplingOptions;
  maxNewTokens: number;
  stop: string[];
  /** 0/1 over the vocabulary, end-of-sequence ids already allowed. */
  allowed?: Uint8Array;
  /** The action format the completion must match as a whole (combined with `allowed` when both are set). */
  constraint?: TokenConstraint;
  ignoreEos?: boolean;
  signal?: AbortSignal;
  /** Called with each newly decoded piece of the completion; the pieces concatenate to the result's text. */
  onText?: (delta: string) => void;
  /** K/V of the prompt's first `prefix.length` tokens (fewer than the prompt's), computed on the same weights. */
  prefix?: PrefixHit;
  /** Receives the K/V of the tokens the row fed with their true input, once decoding is over. */
  keep?: (block: KvBlock) => void;
}

export interface DecodeContext {
  session: ort.InferenceSession;
  shape: DecoderShape;
  tokenizer: TextCodec;
  eosIds: ReadonlySet<number>;
  padId: number;
  /** Extra inputs for every step, the same for every row (full mode's weights as inputs). */
  extraFeeds: Record<string, ort.Tensor>;
  /** Extra inputs of the given rows (indices into the batch's rows), batch first: low-rank and LoRA factors. */
  rowFeeds?: (rows: number[]) => Record<string, ort.Tensor>;
  /**
   * Set where `session` returns `present.*` on a WebGPU device (device-tensors.ts): the caches are fed back
   * from there, the extra inputs are uploaded once a batch, finished rows leave the batch there, and what
   * a row keeps is downloaded once at its end.
   */
  device?: DeviceTensors;
  /** Called after every run with the host tensors' bytes it fed and fetched. */
  onStep?: (t: StepTransfer) => void;
}

interface RowState {
  tokens: number[];
  /** The final completion, set when the row finishes. */
  text: string;
  done: FinishReason | null;
  stream: TextStream | null;
  /** The completion's text followed step by step, for rows read mid-way (stop strings, streaming); null for the others. */
  live: IncrementalText | null;
  /** The length of the row's longest stop string. */
  longestStop: number;
  /** Where the completion stands in the constraint's automaton. */
  constraintState: ReturnType<TokenConstraint['advance']>;
}

function halfToFloat(h: Uint16Array): Float32Array {
  const f = new Float32Array(h.length);
  fromHalf(h, f, 'fp16');
  return f;
}

export async function decodeBatch(ctx: DecodeContext, rows: PreparedRow[]): Promise<GenerateResult[]> {
  const { shape, device } = ctx;
  const cached = rows.map((r) => cachedLength(r));
  const batch = { shape, rows, cached, padId: ctx.padId };
  // a graph with seqlens_k is engine/model/fused-attention.ts's: its caches grow in place, on the host
  const inPlace = ctx.session.inputNames.includes('seqlens_k');
  if (inPlace && device) throw new Error('the in-place KV cache is a host layout; a session that keeps its caches on a device decodes the exported form');
  const concat = inPlace ? null : new ConcatCache(batch, device);
  const kv: KvLayout = concat ?? new InPlaceCache(batch, ctx.session.inputNames);
  const nextPosition = rows.map((r) => r.promptIds.length);

  const state: RowState[] = rows.map((r) => ({
    tokens: [],
    text: '',
    done: null,
    stream: r.onText ? new TextStream(r.stop, r.onText) : null,
    live: r.onText || r.stop.length > 0 ? new IncrementalText((ids) => ctx.tokenizer.decode(ids)) : null,
    longestStop: Math.max(0, ...r.stop.map((stop) => stop.length)),
    constraintState: r.constraint?.initial ?? null,
  }));
  const settle = (s: RowState, reason: FinishReason, text: string): void => {
    s.done = reason;
    s.text = text;
    s.stream?.finish(text);
  };
  rows.forEach((r, b) => {
    if (r.maxNewTokens <= 0) settle(state[b], 'length', '');
    else if (r.constraint?.isFinished(r.constraint.initial)) settle(state[b], 'stop', '');
  });
  // bytes uploaded since the last run's transfer was reported (the extra inputs, on the device route)
  let uploaded = 0;
  // what `place` uploaded, the loop's to dispose; feeds already on the device are their owner's (full-device.ts)
  const placed = new Set<ort.Tensor>();
  const place = async (feeds: Record<string, ort.Tensor>) => {
    if (!device) return feeds;
    const host = Object.fromEntries(Object.entries(feeds).filter(([, t]) => t.location !== 'gpu-buffer'));
    uploaded += Object.values(host).reduce((a, t) => a + (t.data as ArrayBufferView).byteLength, 0);
    const up = await device.upload(host);
    for (const t of Object.values(up)) placed.add(t);
    return { ...feeds, ...up };
  };
  const ours = (m: Record<string, ort.Tensor>) => Object.values(m).filter((t) => placed.has(t));
  let shared: Record<string, ort.Tensor> = {};
  let perRow: Record<string, ort.Tensor> = {};
  const run = async (inputIds: ort.Tensor, positionIds: ort.Tensor) => {
    const feeds: Record<string, ort.Tensor> = { ...shared, ...perRow, ...kv.feeds(), input_ids: inputIds };
    if (shape.hasPositionIds) feeds.position_ids = positionIds;
    const out = await ctx.session.run(feeds);
    device?.adopt(Object.values(out));
    if (!device && out['present.0.key']?.location === 'gpu-buffer') {
      for (const t of Object.values(out)) t.dispose();
      throw new Error('the decoder session keeps present.* on the device: decoding it needs a DeviceTensors (DecodeContext.device)');
    }
    const transfer = ctx.onStep ? hostTransfer(kv.batchRows.length, feeds, out) : null;
    if (transfer && uploaded > 0) transfer.hostToDevice.uploaded = uploaded;
    uploaded = 0;
    return { out, transfer };
  };
  // The completion tokens each row fed with their true input, and the one it feeds at the next step.
  const fed = rows.map((): number[] => []);
  const feeding = new Array<number | null>(rows.length).fill(null);
  let ran = false;

  try {
    shared = await place(ctx.extraFeeds);
    perRow = ctx.rowFeeds ? await place(ctx.rowFeeds([...kv.batchRows])) : {};
    const B = rows.length;
    const prefillInputs = kv.prefill.map(({ ids, positions }) => [new ort.Tensor('int64', ids, [B, ids.length / B]), new ort.Tensor('int64', positions, [B, ids.length / B])] as const);
    // all prefill runs but the last only fill the caches
    for (const [ids, positions] of prefillInputs.slice(0, -1)) {
      const { out, transfer } = await run(ids, positions);
      out.logits.dispose?.();
      kv.advance(out, rows.map(() => false));
      if (transfer) ctx.onStep!(transfer);
    }
    let [inputIds, positionIds] = prefillInputs[prefillInputs.length - 1];

    for (let step = 0; state.some((s) => s.done === null); step++) {
      const { out, transfer } = await run(inputIds, positionIds);
      ran = true;
      kv.advance(out, feeding.map((token) => token !== null));
      feeding.forEach((token, b) => {
        if (token !== null) fed[b].push(token);
        feeding[b] = null;
      });
      const logits = out.logits.type === 'float16' ? halfToFloat(out.logits.data as Uint16Array) : (out.logits.data as Float32Array);
      const V = shape.vocabSize;
      // logits are [batch, S, V], or [batch, 1, V] where the graph computes the head at the last position only
      const L = out.logits.dims[1];
      const slots = kv.batchRows;
      let next = new BigInt64Array(slots.length).fill(BigInt(ctx.padId));
      let nextPos = new BigInt64Array(slots.length);
      slots.forEach((b, j) => {
        const r = rows[b];
        const s = state[b];
        nextPos[j] = BigInt(nextPosition[b]);
        if (s.done !== null) return;
        if (r.signal?.aborted) {
          settle(s, 'abort', ctx.tokenizer.decode(s.tokens));
          return;
        }
        const base = (j * L + kv.logitsAt(b, L)) * V;
        const allowed = r.constraint ? intersect(r.constraint.mask(s.constraintState!), r.allowed) : r.allowed;
        const token = sampleToken(logits.subarray(base, base + (shape.sampleable ?? V)), r.sampling, step, allowed);
        if (token < 0) {
          // The token mask and the constraint leave nothing to choose: end the row where it stands.
          settle(s, 'stop', ctx.tokenizer.decode(s.tokens));
          return;
        }
        s.tokens.push(token);
        next[j] = BigInt(token);
        feeding[b] = token;
        nextPosition[b]++;
        const atEos = !r.ignoreEos && ctx.eosIds.has(token);
        const atLength = s.tokens.length >= r.maxNewTokens;
        if (r.constraint) s.constraintState = r.constraint.advance(s.constraintState!, token);
        // A whole match that cannot grow ends the row without spending a step on end-of-sequence.
        const matched = r.constraint !== undefined && s.constraintState !== null && r.constraint.isFinished(s.constraintState);
        if (!atEos && !atLength && !matched) {
          // Mid-row, only rows something reads (stop strings, streaming) need their text, and only what the
          // new token added: the stop strings are looked for where they could end in it.
          if (s.live === null) return;
          const searched = s.live.stableLength;
          s.live.advance(s.tokens);
          const text = s.live.text;
          const cut = firstStop(text, r.stop, searched - s.longestStop + 1);
          if (cut >= 0) settle(s, 'stop', text.slice(0, cut));
          else s.stream?.update(text);
          return;
        }
        // The row ends here: its whole completion, decoded once.
        const text = ctx.tokenizer.decode(s.tokens);
        const cut = atEos ? -1 : firstStop(text, r.stop, 0);
        if (cut >= 0) settle(s, 'stop', text.slice(0, cut));
        else settle(s, matched || atEos ? 'stop' : 'length', text);
      });
      out.logits.dispose?.();
      // A finished row whose last token is fed leaves the batch once a quarter of the slots are such rows:
      // each gather copies the remaining caches once, so the copies stay a bounded share of the steps.
      const leaving = device && concat ? slots.filter((b) => state[b].done !== null && feeding[b] === null) : [];
      if (concat && leaving.length > 0 && leaving.length * 4 >= slots.length && leaving.length < slots.length && state.some((s) => s.done === null)) {
        await keepRows(ctx.shape, ctx.device, rows, leaving.map((b) => [b, slots.indexOf(b)]), kv, fed);
        const staying = slots.flatMap((b, j) => (leaving.includes(b) ? [] : [j]));
        await concat.leave(staying);
        if (transfer) transfer.hostToDevice.rows = staying.length * 8;
        next = BigInt64Array.from(staying, (j) => next[j]);
        nextPos = BigInt64Array.from(staying, (j) => nextPos[j]);
        if (ctx.rowFeeds) {
          device!.dispose(ours(perRow));
          perRow = await place(ctx.rowFeeds([...kv.batchRows]));
        }
      }
      if (transfer) ctx.onStep!(transfer);
      inputIds = new ort.Tensor('int64', next, [kv.batchRows.length, 1]);
      positionIds = new ort.Tensor('int64', nextPos, [kv.batchRows.length, 1]);
    }

    if (ran) await keepRows(ctx.shape, ctx.device, rows, kv.batchRows.map((b, j) => [b, j]), kv, fed);
  } finally {
    device?.dispose([...Object.values(kv.caches), ...ours(shared), ...ours(perRow)]);
  }

  return rows.map((r, b) => {
    const s = state[b];
    return {
      text: s.text,
      tokenIds: s.tokens,
      promptTokens: r.promptIds.length,
      cachedTokens: cached[b],
      completionTokens: s.tokens.length,
      finishReason: s.done ?? 'length',
    };
  });
}

/** Bytes of the host tensors among one run's feeds and outputs. */
function hostTransfer(rows: number, feeds: Record<string, ort.Tensor>, out: Record<string, ort.Tensor>): StepTransfer {
  const host = (m: Record<string, ort.Tensor>) => Object.fromEntries(Object.entries(m).flatMap(([name, t]) => (t.location === 'cpu' ? [[name, (t.data as ArrayBufferView).byteLength]] : [])));
  return { rows, hostToDevice: host(feeds), deviceToHost: host(out) };
}

/** `constraint` ∧ `allowed`, in a fresh array (the constraint's masks are cached and shared). */
function intersect(constraint: Uint8Array, allowed: Uint8Array | undefined): Uint8Array {
  if (!allowed) return constraint;
  const both = new Uint8Array(constraint.length);
  for (let i = 0; i < both.length; i++) both[i] = constraint[i] & allowed[i];
  return both;
}

/** Where the first stop string in `text` starts, looking from `from` on; -1 when there is none. */
function firstStop(text: string, stops: readonly string[], from: number): number {
  let first = -1;
  for (const s of stops) {
    if (s.length === 0) continue;
    const i = text.indexOf(s, Math.max(0, from));
    if (i >= 0 && (first < 0 || i < first)) first = i;
  }
  return first;
}
