/**
 * The K/V blocks a decode batch exchanges with the prefix cache (prefix-cache.ts): the prefix a row brings,
 * checked against its prompt before anything is fed, and the block a row keeps, gathered after decoding
 * from the caches at the spans the layout (kv-layout.ts) gives for the row's true tokens.
 *
 * Invariant: a block holds the K/V of exactly its tokens, in order. A brought prefix is the prompt's own
 * first tokens, fewer than the whole prompt; a kept block is the prompt and every completion token the row
 * fed with its true input, never the padding fed once it finished.
 */
import type * as ort from 'onnxruntime-node';
import type { DeviceTensors } from './device-tensors.ts';
import type { KvLayout } from './kv-layout.ts';
import type { KvBlock, KvData, PrefixHit } from './prefix-cache.ts';

/** The decoder's K/V dimensions (DecoderShape's). */
export interface KvShape {
  layers: number;
  kvHeads: number;
  headDim: number;
}

/** What a row of the batch says about its K/V: its prompt and, if it keeps its block, where to. */
export interface KeepingRow {
  promptIds: readonly number[];
  keep?: (block: KvBlock) => void;
}

/** The row's cached prefix length, after checking the hit is one for its prompt. */
export function cachedLength(r: { promptIds: readonly number[]; prefix?: PrefixHit }): number {
  if (!r.prefix) return 0;
  const { block, length } = r.prefix;
  if (!Number.isInteger(length) || length < 0 || length >= r.promptIds.length || length > block.tokens.length) {
    throw new RangeError(`a cached prefix of ${length} tokens does not fit a prompt of ${r.promptIds.length} (block of ${block.tokens.length})`);
  }
  for (let i = 0; i < length; i++) if (block.tokens[i] !== r.promptIds[i]) throw new Error(`a cached prefix differs from its prompt at token ${i}`);
  return length;
}

/**
 * Hands each of `which` ([row, batch position] pairs) that has `keep` the K/V of the tokens it fed with
 * their true input (`fed`, at the layout's spans), downloading those rows first where the caches are on the device.
 */
export async function keepRows(shape: KvShape, device: DeviceTensors | undefined, rows: readonly KeepingRow[], which: ReadonlyArray<readonly [number, number]>, kv: KvLayout, fed: readonly number[][]): Promise<void> {
  const keeping = which.filter(([b]) => rows[b].keep);
  if (keeping.length === 0) return;
  const host = device ? await device.download(kv.caches, keeping.map(([, j]) => j)) : kv.caches;
  keeping.forEach(([b, j], k) => {
    const r = rows[b];
    r.keep!({ tokens: [...r.promptIds, ...fed[b]], layers: gatherRow(shape, host, device ? k : j, kv.spans(b)) });
  });
}

/** Row b's K/V at `spans` ([start, length] along the sequence) of the present tensors, as [kvHeads, Σ length, headDim]. */
function gatherRow(shape: KvShape, present: Record<string, ort.Tensor>, b: number, spans: ReadonlyArray<[number, number]>): KvBlock['layers'] {
  const { kvHeads: H, headDim: D } = shape;
  const T = spans.reduce((a, [, n]) => a + n, 0);
  return Array.from({ length: shape.layers }, (_, l) => {
    const gather = (kv: 'key' | 'value'): KvData => {
      const tensor = present[`past_key_values.${l}.${kv}`];
      const total = tensor.dims[2];
      const source = tensor.data as KvData;
      const out = source instanceof Uint16Array ? new Uint16Array(H * T * D) : new Float32Array(H * T * D);
      for (let h = 0; h < H; h++) {
        let at = h * T * D;
        for (const [start, n] of spans) {
          const from = ((b * H + h) * total + start) * D;
          out.set(source.subarray(from, from + n * D), at);
          at += n * D;
        }
      }
      return out;
    };
    return { key: gather('key'), value: gather('value') };
  });
}
