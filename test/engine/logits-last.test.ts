import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { logitsAtLastPosition } from '../../trainer/engine/model/logits-last.ts';
import { buildPreset } from '../../trainer/engine/model/open-model.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { fullLogits, maxAbsDiff, session } from './onnx-helpers.ts';

const c = PRESETS.tiny;

describe('logits at the last position only', () => {
  it('prefill logits are [rows × 1 × vocab] and equal the full graph at each row’s last position', async () => {
    const weights = initDecoderWeights(c, 8);
    const full = await session(buildDecoder(c, weights));
    const rewritten = buildDecoder(c, weights);
    expect(logitsAtLastPosition(rewritten)).toBe(true);
    const last = await session(rewritten);
    const rows = [[256, 1, 2, 3, 4, 5, 6, 7, 8, 9], [256, 40, 41]];
    const expected = await fullLogits(full, c, rows);
    // fullLogits reads each row's positions; the rewritten graph has one, so read its raw output
    const W = 10;
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from([...rows[0], 0, 0, 0, 0, 0, 0, 0, ...rows[1]].map(BigInt)), [2, W]),
      attention_mask: new ort.Tensor('int64', BigInt64Array.from([...Array(W).fill(1), ...Array(7).fill(0), 1, 1, 1].map(BigInt)), [2, W]),
      position_ids: new ort.Tensor('int64', BigInt64Array.from([...rows[0].map((_, j) => j), 0, 0, 0, 0, 0, 0, 0, 0, 1, 2].map(BigInt)), [2, W]),
    };
    for (let l = 0; l < c.num_hidden_layers; l++) for (const kv of ['key', 'value']) feeds[`past_key_values.${l}.${kv}`] = new ort.Tensor('float32', new Float32Array(0), [2, 4, 0, 16]);
    const out = await last.run(feeds);
    expect(out.logits.dims).toEqual([2, 1, c.vocab_size]);
    const data = out.logits.data as Float32Array;
    expect(maxAbsDiff(data.subarray(0, c.vocab_size), expected[0][9])).toBeLessThan(1e-5);
    expect(maxAbsDiff(data.subarray(c.vocab_size), expected[1][2])).toBeLessThan(1e-5);
    // the KV caches still cover every position
    expect(out['present.0.key'].dims).toEqual([2, 4, W, 16]);
  });

  it('engines built with it decode exactly as with the full logits graph', async () => {
    const loaded = buildPreset('tiny', 8);
    expect(loaded.graph.graph.node.some((n) => n.name === '/logits_last/Slice')).toBe(true);
    const plain = { ...buildPreset('tiny', 8), graph: buildDecoder(c, initDecoderWeights(c, 8)) };
    const rows = [
      { promptIds: [256, 5, 6, 7, 8, 9, 10, 11], member: { kind: 'base' as const }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 12, stop: [] },
      { promptIds: [256, 70], member: { kind: 'base' as const }, sampling: { temperature: 0.9, topP: 0.95, topK: 0, seed: 3 }, maxNewTokens: 12, stop: [] },
    ];
    for (const mode of ['full', 'lowrank'] as const) {
      const a = await createOnnxEngine(loaded, { model: { preset: 'tiny', seed: 8 }, mode });
      const b = await createOnnxEngine(plain, { model: { preset: 'tiny', seed: 8 }, mode });
      const [ra, rb] = [await a.generate(rows), await b.generate(rows)];
      expect(ra.map((r) => r.tokenIds)).toEqual(rb.map((r) => r.tokenIds));
      expect(ra[0].tokenIds.length).toBe(12);
      await Promise.all([a.close(), b.close()]);
    }
  });
});
