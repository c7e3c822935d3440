/**
 * Where a decode batch's keys and values live between steps, for the two graph forms:
 *
 * - ConcatCache (the exported form): each step feeds `past_key_values.*` and gets `present.*` =
 *   Concat(past, new) back, a new tensor a step. Prompts are left-padded; a row's cached prefix is
 *   right-aligned in the past, P = max p wide, and the holes are masked by `attention_mask`.
 * - InPlaceCache (engine/model/fused-attention.ts's GroupQueryAttention form): one buffer a cache, [B, kvHeads,
 *   buffer, headDim], fed as the past every step; the graph returns only the run's own keys and values
 *   (`kv_step.*`), which are written into the buffers at each row's slots. Row b's tokens sit at slots
 *   0…n−1 without holes (prefix, then prompt, then completion), so prompts are right-padded and a row's
 *   length is `seqlens_k`; a row that has finished keeps writing its padding at its next slot, which
 *   nothing reads.
 *
 * Both give the decode loop the prompt's layout, each step's feeds, the logits' position of a row and,
 * after decoding, where each row's true tokens are. A ConcatCache may keep its caches on a WebGPU device
 * (device-tensors.ts): the presents come back there and are fed back from there, and rows that finished
 * can leave the batch there (`leave`); the batch's rows are then `batchRows`, in batch order.
 */
import * as ort from 'onnxruntime-node';
import type { DeviceTensors } from './device-tensors.ts';
import type { KvData, PrefixHit } from './prefix-cache.ts';

/** A prefill run's input_ids and position_ids, [B, width]. */
export interface PrefillRun {
  ids: BigInt64Array;
  positions: BigInt64Array;
}

export interface KvLayout {
  /** The prompts' runs: the logits of the last are the first sampled from, the others' are not read. */
  readonly prefill: readonly PrefillRun[];
  /** The caches (`past_key_values.{l}.key|value` [batch, kvHeads, T, headDim]) as the last run left them. */
  readonly caches: Record<string, ort.Tensor>;
  /** The rows in the batch, in batch order (all of them, unless rows left). */
  readonly batchRows: readonly number[];
  /** The next run's cache and length inputs. */
  feeds(): Record<string, ort.Tensor>;
  /** The index along the logits' positions (L of them) of row b's last token in the run just made. */
  logitsAt(b: number, L: number): number;
  /** After a run: `out` its outputs, `fed[b]` whether row b fed a true token in it. */
  advance(out: Record<string, ort.Tensor>, fed: readonly boolean[]): void;
  /** Row b's true tokens along the caches' sequence axis, [start, length] spans in token order. */
  spans(b: number): Array<[number, number]>;
}

/** The decoder's cache dimensions (decode-loop.ts's DecoderShape has them). */
interface CacheShape {
  layers: number;
  kvHeads: number;
  headDim: number;
  kvType?: 'float32' | 'float16';
}

interface Batch {
  shape: CacheShape;
  rows: ReadonlyArray<{ promptIds: readonly number[]; maxNewTokens: number; prefix?: PrefixHit }>;
  /** Each row's cached prefix length. */
  cached: readonly number[];
  padId: number;
}

const int32 = (data: Int32Array, dims: number[]) => new ort.Tensor('int32', data, dims);

/** Slots an in-place buffer holds past the prompts at first (it doubles from there as runs need). */
const GROWTH = 64;

/** Fresh caches [B, kvHeads, T, headDim], each row's prefix copied in at slot `at(b, p)` (zeros elsewhere). */
function cachesWithPrefixes({ shape, rows, cached }: Batch, T: number, at: (b: number, p: number) => number): Record<string, ort.Tensor> {
  const B = rows.length;
  const { kvHeads: H, headDim: D } = shape;
  const half = shape.kvType === 'float16';
  const caches: Record<string, ort.Tensor> = {};
  for (let l = 0; l < shape.layers; l++) {
    for (const kv of ['key', 'value'] as const) {
      const data: KvData = half ? new Uint16Array(B * H * T * D) : new Float32Array(B * H * T * D);
      rows.forEach((r, b) => {
        const p = cached[b];
        if (p === 0) return;
        const source = r.prefix!.block.layers[l][kv];
        const n = r.prefix!.block.tokens.length;
        if ((source instanceof Uint16Array) !== half) throw new Error(`a cached prefix holds ${half ? 'fp32' : 'fp16'} K/V; the graph's are ${half ? 'fp16' : 'fp32'}`);
        for (let h = 0; h < H; h++) data.set(source.subarray(h * n * D, (h * n + p) * D), ((b * H + h) * T + at(b, p)) * D);
      });
      caches[`past_key_values.${l}.${kv}`] = half ? new ort.Tensor('float16', data as Uint16Array, [B, H, T, D]) : new ort.Tensor('float32', data as Float32Array, [B, H, T, D]);
    }
  }
  return caches;
}

/** The caches of a run's outputs, under the names they are fed by. */
function presents(shape: CacheShape, out: Record<string, ort.Tensor>): Record<string, ort.Tensor> {
  const caches: Record<string, ort.Tensor> = {};
  for (let l = 0; l < shape.layers; l++) for (const kv of ['key', 'value']) caches[`past_key_values.${l}.${kv}`] = out[`present.${l}.${kv}`];
  return caches;
}

export class ConcatCache implements KvLayout {
  readonly prefill: PrefillRun[];
  caches: Record<string, ort.Tensor>;
  batchRows: number[];
  private readonly P: number;
  private readonly width: number;
  private readonly rest: number[];
  private readonly holes: Array<Array<[number, number]>>;
  private total: number;
  private readonly fedCount: number[];

  constructor(
    private readonly batch: Batch,
    private readonly device?: DeviceTensors,
  ) {
    const { rows, cached } = batch;
    const B = rows.length;
    this.P = Math.max(0, ...cached);
    this.rest = rows.map((r, b) => r.promptIds.length - cached[b]);
    this.width = Math.max(...this.rest);
    const { P, width, rest } = this;
    const ids = new BigInt64Array(B * width).fill(BigInt(batch.padId));
    const positions = new BigInt64Array(B * width);
    rows.forEach((r, b) => {
      const pad = width - rest[b];
      for (let j = 0; j < rest[b]; j++) {
        ids[b * width + pad + j] = BigInt(r.promptIds[cached[b] + j]);
        positions[b * width + pad + j] = BigInt(cached[b] + j);
      }
    });
    this.prefill = [{ ids, positions }];
    // Row b's attention mask is ones but for its holes (left padding of the past and of the prompt's rest),
    // at every step: it is built from them with a few fills per row, not kept as arrays that grow (that
    // cost O(rows × length) in BigInt conversions per step; docs/BENCHMARKS.md).
    this.holes = rows.map((_, b): Array<[number, number]> => [[0, P - cached[b]], [P, P + width - rest[b]]]);
    this.total = P + width;
    this.caches = cachesWithPrefixes(batch, P, (b, p) => P - p);
    this.fedCount = rows.map(() => 0);
    this.batchRows = rows.map((_, b) => b);
  }

  feeds(): Record<string, ort.Tensor> {
    const n = this.batchRows.length;
    const mask = new BigInt64Array(n * this.total).fill(1n);
    this.batchRows.forEach((b, j) => {
      for (const [start, end] of this.holes[b]) if (end > start) mask.fill(0n, j * this.total + start, j * this.total + end);
    });
    return { ...this.caches, attention_mask: new ort.Tensor('int64', mask, [n, this.total]) };
  }

  logitsAt(_b: number, L: number): number {
    return L - 1;
  }

  advance(out: Record<string, ort.Tensor>, fed: readonly boolean[]): void {
    // the previous run's caches are consumed (on the device they are freed here; host ones are left to GC)
    this.device?.dispose(Object.values(this.caches));
    this.caches = presents(this.batch.shape, out);
    fed.forEach((f, b) => f && this.fedCount[b]++);
    this.total++;
  }

  /** Only the batch positions `staying` (indices into batchRows) go on; their caches are gathered on the device. */
  async leave(staying: readonly number[]): Promise<void> {
    if (!this.device) throw new Error('rows leave a batch only where its caches are on a device');
    const gathered = await this.device.gather(this.caches, staying);
    this.device.dispose(Object.values(this.caches));
    this.caches = gathered;
    this.batchRows = staying.map((j) => this.batchRows[j]);
  }

  spans(b: number): Array<[number, number]> {
    const { P, width, rest } = this;
    const p = this.batch.cached[b];
    return [[P - p, p], [P + width - rest[b], rest[b]], [P + width, this.fedCount[b]]];
  }
}

export class InPlaceCache implements KvLayout {
  readonly prefill: PrefillRun[];
  readonly caches: Record<string, ort.Tensor>;
  private readonly width: number;
  private readonly rest: number[];
  /** Row b's true tokens in the caches: its next token goes to slot `slots[b]`. */
  private readonly slots: number[];
  /** Runs made so far. */
  private runs = 0;
  /** The prompts' rests are fed a token a run (see the constructor). */
  private readonly stepped: boolean;
  private readonly hasLogitsIndex: boolean;
  /** The most slots any run can need. */
  private readonly capacity: number;
  readonly batchRows: readonly number[];

  constructor(private readonly batch: Batch, inputNames: readonly string[]) {
    const { rows, cached, shape, padId } = batch;
    const B = rows.length;
    if (shape.kvType === 'float16') throw new Error('the in-place KV cache holds float32 keys and values only');
    this.rest = rows.map((r, b) => r.promptIds.length - cached[b]);
    this.width = Math.max(...this.rest);
    const { width, rest } = this;
    // onnxruntime's CPU kernel prefills several tokens over a cached past one row at a time only: such a
    // batch feeds the prompts' rests a token a run, each row starting so that all end on the last run
    // (a row not yet started writes padding at its next slot, which its first token overwrites).
    this.stepped = B > 1 && width > 1 && cached.some((p) => p > 0);
    const token = (b: number, j: number) => BigInt(rows[b].promptIds[cached[b] + j]);
    if (this.stepped) {
      this.prefill = Array.from({ length: width }, (_, t) => {
        const ids = new BigInt64Array(B).fill(BigInt(padId));
        const positions = new BigInt64Array(B);
        rows.forEach((_, b) => {
          const j = t - (width - rest[b]);
          ids[b] = j >= 0 ? token(b, j) : BigInt(padId);
          positions[b] = BigInt(cached[b] + Math.max(0, j));
        });
        return { ids, positions };
      });
    } else {
      // right-padded: the padding is never attended (it sits after the row's tokens) and its slots are overwritten
      const ids = new BigInt64Array(B * width).fill(BigInt(padId));
      const positions = new BigInt64Array(B * width);
      rows.forEach((_, b) => {
        for (let j = 0; j < rest[b]; j++) {
          ids[b * width + j] = token(b, j);
          positions[b * width + j] = BigInt(cached[b] + j);
        }
      });
      this.prefill = [{ ids, positions }];
    }
    // The prefill writes slots [p, p + width) of each row; a row then writes one slot a run: its tokens,
    // the last one included, then padding at the slot after them once it has finished. The kernel clears
    // and fills a present as long as the buffer every run, so the buffer starts GROWTH slots past the
    // prompts and doubles when a run needs more, up to what the budgets can reach.
    this.capacity = Math.max(Math.max(0, ...cached) + width, ...rows.map((r) => r.promptIds.length + Math.max(1, r.maxNewTokens) + 1));
    this.caches = cachesWithPrefixes(batch, Math.min(this.capacity, Math.max(0, ...cached) + width + GROWTH), () => 0);
    this.slots = [...cached];
    this.hasLogitsIndex = inputNames.includes('logits_index');
    this.batchRows = rows.map((_, b) => b);
  }

  feeds(): Record<string, ort.Tensor> {
    const B = this.batch.rows.length;
    const whole = this.runs === 0 && !this.stepped;
    // seqlens_k: the last slot each row writes in this run
    const last = Int32Array.from(this.slots, (s) => (whole ? s + this.width - 1 : s));
    this.reserve(Math.max(...last) + 1);
    const feeds: Record<string, ort.Tensor> = {
      ...this.caches,
      seqlens_k: int32(last, [B]),
      total_sequence_length: int32(Int32Array.of(Math.max(...last) + 1), []),
    };
    if (this.hasLogitsIndex) feeds.logits_index = new ort.Tensor('int64', BigInt64Array.from(this.rest, (n) => BigInt(whole ? n - 1 : 0)), [B, 1, 1]);
    return feeds;
  }

  logitsAt(b: number, L: number): number {
    return L === 1 ? 0 : this.rest[b] - 1;
  }

  advance(out: Record<string, ort.Tensor>, fed: readonly boolean[]): void {
    this.write(out);
    const t = this.runs++;
    if (t >= this.prefill.length) fed.forEach((f, b) => f && this.slots[b]++);
    else if (!this.stepped) this.rest.forEach((n, b) => (this.slots[b] += n));
    else this.rest.forEach((n, b) => t >= this.width - n && this.slots[b]++);
  }

  spans(b: number): Array<[number, number]> {
    return [[0, this.slots[b]]];
  }

  /** Buffers of at least `slots` slots: doubled (within the capacity) and copied over when shorter. */
  private reserve(slots: number): void {
    const M = this.caches['past_key_values.0.key'].dims[2];
    if (slots <= M) return;
    const grown = Math.min(this.capacity, Math.max(slots, 2 * M));
    const [B, H, , D] = this.caches['past_key_values.0.key'].dims;
    for (const [name, tensor] of Object.entries(this.caches)) {
      const from = tensor.data as Float32Array;
      const to = new Float32Array(B * H * grown * D);
      for (let bh = 0; bh < B * H; bh++) to.set(from.subarray(bh * M * D, (bh + 1) * M * D), bh * grown * D);
      this.caches[name] = new ort.Tensor('float32', to, [B, H, grown, D]);
    }
  }

  /** The run's keys and values [B, kvHeads, S, headDim] into the buffers, row b's from its next slot on. */
  private write(out: Record<string, ort.Tensor>): void {
    const { layers, kvHeads: H, headDim: D } = this.batch.shape;
    for (let l = 0; l < layers; l++) {
      for (const kv of ['key', 'value']) {
        const step = out[`kv_step.${l}.${kv}`];
        const buffer = this.caches[`past_key_values.${l}.${kv}`];
        const [B, , S] = step.dims;
        const M = buffer.dims[2];
        const from = step.data as Float32Array;
        const to = buffer.data as Float32Array;
        for (let b = 0; b < B; b++) {
          for (let h = 0; h < H; h++) to.set(from.subarray((b * H + h) * S * D, (b * H + h + 1) * S * D), ((b * H + h) * M + this.slots[b]) * D);
        }
      }
    }
  }
}
