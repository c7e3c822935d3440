import { describe, expect, it } from 'vitest';
import { byteTokenizerConfig, byteTokenizerJson } from '../../trainer/engine/model/byte-tokenizer.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { ChatTokenizer } from '../../trainer/engine/model/chat-tokenizer.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';

describe('padded vocabulary rows', () => {
  it('ids past the tokenizer (vocab_size padded like Qwen3’s) are never sampled, even when their logits are the largest', async () => {
    const tokenizer = new ChatTokenizer(byteTokenizerJson(), byteTokenizerConfig());
    const T = tokenizer.tokenCount;
    expect(T).toBe(PRESETS.tiny.vocab_size);
    const c = { ...PRESETS.tiny, vocab_size: T + 64 };
    const weights = initDecoderWeights(c, 4);
    // the padded head columns win every argmax by a wide margin
    const head = weights.find((w) => w.name === 'lm_head.weight')!;
    for (let i = 0; i < c.hidden_size; i++) for (let v = T; v < c.vocab_size; v++) head.data[i * c.vocab_size + v] = 0.5 * Math.sign(Math.sin(i + 1));
    const model = { dir: 'padded', config: c, tokenizer, graph: buildDecoder(c, weights), weights };
    const engine = await createOnnxEngine(model, { model: { preset: 'tiny', seed: 4 }, mode: 'lowrank' });
    const rows = [0, 0.8, 1.5].map((temperature, seed) => ({ promptIds: [256, 10, 20, 30], member: { kind: 'base' as const }, sampling: { temperature, topP: 1, topK: 0, seed }, maxNewTokens: 24, stop: [], ignoreEos: true }));
    const out = await engine.generate(rows);
    await engine.close();
    for (const r of out) {
      expect(r.tokenIds.length).toBe(24);
      expect(Math.max(...r.tokenIds)).toBeLessThan(T);
    }
  });
});
