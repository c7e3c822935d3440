/**
 * Greedy decoding with plain onnxruntime-node on a model file, as any other tool would load an export: an
 * InferenceSession on the path, the whole sequence recomputed each step with empty past caches.
 */
import * as ort from 'onnxruntime-node';
import { headDim, kvHeads, type ModelConfig } from '../../../trainer/engine/model/config.ts';
import { fp16Value } from '../../../trainer/engine/onnx/half.ts';

export async function plainGreedy(path: string, c: ModelConfig, prompts: number[][], n: number, extra: Record<string, ort.Tensor> = {}): Promise<number[][]> {
  const s = await ort.InferenceSession.create(path);
  try {
    const half = (s.inputMetadata.find((m) => m.name === 'past_key_values.0.key') as { type?: string } | undefined)?.type === 'float16';
    const out: number[][] = [];
    for (const prompt of prompts) {
      const ids = [...prompt];
      for (let step = 0; step < n; step++) {
        const len = ids.length;
        const feeds: Record<string, ort.Tensor> = {
          ...extra,
          input_ids: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, len]),
          attention_mask: new ort.Tensor('int64', new BigInt64Array(len).fill(1n), [1, len]),
          position_ids: new ort.Tensor('int64', BigInt64Array.from(ids, (_, i) => BigInt(i)), [1, len]),
        };
        for (let l = 0; l < c.num_hidden_layers; l++) {
          for (const kv of ['key', 'value']) {
            const dims = [1, kvHeads(c), 0, headDim(c)];
            feeds[`past_key_values.${l}.${kv}`] = half ? new ort.Tensor('float16', new Uint16Array(0), dims) : new ort.Tensor('float32', new Float32Array(0), dims);
          }
        }
        const logits = (await s.run(feeds)).logits;
        const V = c.vocab_size;
        const raw = logits.data as Float32Array | Uint16Array;
        const last = Array.from(raw.subarray((len - 1) * V, len * V), (v) => (logits.type === 'float16' ? fp16Value(v) : v));
        ids.push(last.indexOf(Math.max(...last)));
      }
      out.push(ids.slice(prompt.length));
    }
    return out;
  } finally {
    await s.release();
  }
}
