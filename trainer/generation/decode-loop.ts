/**
 * Batched autoregressive decoding with a KV cache over any decoder with the HF/optimum IO names. Prompts
 * are left-padded (attention_mask 0, position ids counted over real tokens only), one prefill pass, then
 * one token per row per step, the `present.*` outputs fed back as `past_key_values.*`. Rows stop on an
 * end-of-sequence token, a stop string, their token budget or their abort signal. A row with `onText` gets
 * its completion in pieces as it is decoded (see text-stream.ts), the last piece when it finishes.
 */
import * as ort from 'onnxruntime-node';
import type { TextCodec } from './text-codec.ts';
import type { FinishReason, GenerateResult, SamplingOptions } from '../engine.ts';
import { IncrementalText } from './incremental-text.ts';
import { sampleToken } from './sampler.ts';
import { TextStream } from './text-stream.ts';
import type { TokenConstraint } from './token-constraint.ts';
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
}

export interface DecodeContext {
  session: ort.InferenceSession;
  shape: DecoderShape;
  tokenizer: TextCodec;
  eosIds: ReadonlySet<number>;
  padId: number;
  /** Extra inputs for every step: weights (full mode) or per-row low-rank factors (batch = rows.length). */
  extraFeeds: Record<string, ort.Tensor>;
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
  const B = rows.length;
  const { shape } = ctx;
  const width = Math.max(...rows.map((r) => r.promptIds.length));
  const ids = new BigInt64Array(B * width).fill(BigInt(ctx.padId));
  // Row b's attention mask is `pads[b]` zeros (its left padding) then ones, at every step: it is built
  // from that with two fills per row, not kept as arrays that grow (that cost O(rows × length) in
  // BigInt conversions per step; docs/BENCHMARKS.md).
  const pads = rows.map((r) => width - r.promptIds.length);
  const positions = new BigInt64Array(B * width);
  const nextPosition = new Array<number>(B);
  rows.forEach((r, b) => {
    const pad = width - r.promptIds.length;
    r.promptIds.forEach((id, j) => {
      ids[b * width + pad + j] = BigInt(id);
      positions[b * width + pad + j] = BigInt(j);
    });
    nextPosition[b] = r.promptIds.length;
  });

  let past: Record<string, ort.Tensor> = {};
  for (let l = 0; l < shape.layers; l++) {
    for (const kv of ['key', 'value']) {
      const empty = shape.kvType === 'float16' ? new ort.Tensor('float16', new Uint16Array(0), [B, shape.kvHeads, 0, shape.headDim]) : new ort.Tensor('float32', new Float32Array(0), [B, shape.kvHeads, 0, shape.headDim]);
      past[`past_key_values.${l}.${kv}`] = empty;
    }
  }
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
  let inputIds = new ort.Tensor('int64', ids, [B, width]);
  let positionIds = new ort.Tensor('int64', positions, [B, width]);
  let total = width;

  for (let step = 0; state.some((s) => s.done === null); step++) {
    const feeds: Record<string, ort.Tensor> = {
      ...ctx.extraFeeds,
      ...past,
      input_ids: inputIds,
      attention_mask: new ort.Tensor('int64', attentionMask(pads, total), [B, total]),
    };
    if (shape.hasPositionIds) feeds.position_ids = positionIds;
    const out = await ctx.session.run(feeds);
    const logits = out.logits.type === 'float16' ? halfToFloat(out.logits.data as Uint16Array) : (out.logits.data as Float32Array);
    const V = shape.vocabSize;
    // logits are [B, S, V], or [B, 1, V] where the graph computes the head at the last position only
    const L = out.logits.dims[1];
    const next = new BigInt64Array(B).fill(BigInt(ctx.padId));
    const nextPos = new BigInt64Array(B);
    rows.forEach((r, b) => {
      const s = state[b];
      nextPos[b] = BigInt(nextPosition[b]);
      if (s.done !== null) return;
      if (r.signal?.aborted) {
        settle(s, 'abort', ctx.tokenizer.decode(s.tokens));
        return;
      }
      const base = (b * L + L - 1) * V;
      const allowed = r.constraint ? intersect(r.constraint.mask(s.constraintState!), r.allowed) : r.allowed;
      const token = sampleToken(logits.subarray(base, base + (shape.sampleable ?? V)), r.sampling, step, allowed);
      if (token < 0) {
        // The token mask and the constraint leave nothing to choose: end the row where it stands.
        settle(s, 'stop', ctx.tokenizer.decode(s.tokens));
        return;
      }
      s.tokens.push(token);
      next[b] = BigInt(token);
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
    past = {};
    for (let l = 0; l < shape.layers; l++) {
      for (const kv of ['key', 'value']) past[`past_key_values.${l}.${kv}`] = out[`present.${l}.${kv}`];
    }
    total++;
    inputIds = new ort.Tensor('int64', next, [B, 1]);
    positionIds = new ort.Tensor('int64', nextPos, [B, 1]);
  }

  return rows.map((r, b) => {
    const s = state[b];
    return {
      text: s.text,
      tokenIds: s.tokens,
      promptTokens: r.promptIds.length,
      completionTokens: s.tokens.length,
      finishReason: s.done ?? 'length',
    };
  });
}

/** [rows, total] int64: row b has pads[b] zeros, then ones. */
function attentionMask(pads: readonly number[], total: number): BigInt64Array {
  const mask = new BigInt64Array(pads.length * total).fill(1n);
  pads.forEach((pad, b) => mask.fill(0n, b * total, b * total + pad));
  return mask;
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
