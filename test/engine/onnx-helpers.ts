/** Test helpers: run a decoder graph directly (no cache, no engine) to compare against. */
import * as ort from 'onnxruntime-node';
import { headDim, kvHeads, type ModelConfig } from '../../trainer/engine/model/config.ts';
import { encodeModel, type ModelProto } from '../../trainer/engine/onnx/proto.ts';

export async function session(model: ModelProto): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(encodeModel(model), { graphOptimizationLevel: 'all' });
}

/** Logits [row][position][vocab] of a left-padded batch, recomputed from scratch (empty past). */
export async function fullLogits(s: ort.InferenceSession, c: ModelConfig, rows: number[][], extra: Record<string, ort.Tensor> = {}): Promise<Float32Array[][]> {
  const B = rows.length;
  const W = Math.max(...rows.map((r) => r.length));
  const ids = new BigInt64Array(B * W);
  const mask = new BigInt64Array(B * W);
  const pos = new BigInt64Array(B * W);
  rows.forEach((r, b) => {
    const pad = W - r.length;
    r.forEach((id, j) => {
      ids[b * W + pad + j] = BigInt(id);
      mask[b * W + pad + j] = 1n;
      pos[b * W + pad + j] = BigInt(j);
    });
  });
  const feeds: Record<string, ort.Tensor> = {
    ...extra,
    input_ids: new ort.Tensor('int64', ids, [B, W]),
    attention_mask: new ort.Tensor('int64', mask, [B, W]),
    position_ids: new ort.Tensor('int64', pos, [B, W]),
  };
  for (let l = 0; l < c.num_hidden_layers; l++) {
    for (const kv of ['key', 'value']) feeds[`past_key_values.${l}.${kv}`] = new ort.Tensor('float32', new Float32Array(0), [B, kvHeads(c), 0, headDim(c)]);
  }
  const out = await s.run(feeds);
  const data = out.logits.data as Float32Array;
  const V = c.vocab_size;
  return rows.map((r, b) => r.map((_, j) => data.slice((b * W + W - r.length + j) * V, (b * W + W - r.length + j + 1) * V)));
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

export function argmax(a: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return best;
}
