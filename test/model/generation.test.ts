import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine, GenerateRow } from '../../trainer/engine.ts';
import { ContextLengthError, createEngine } from '../../trainer/model/create-engine.ts';
import { buildDecoder } from '../../trainer/model/build-decoder.ts';
import { PRESETS } from '../../trainer/model/presets.ts';
import { initDecoderWeights } from '../../trainer/model/weights.ts';
import { argmax, fullLogits, session } from './onnx-helpers.ts';

const c = PRESETS.tiny;
let engine: Engine;
beforeAll(async () => {
  engine = await createEngine({ model: { preset: 'tiny', seed: 3 }, mode: 'full' });
});
afterAll(() => engine.close());

const greedy = { temperature: 0, topP: 1, topK: 0, seed: 0 };
function row(over: Partial<GenerateRow> = {}): GenerateRow {
  return { promptIds: [256, 10, 20, 30], member: { kind: 'base' }, sampling: greedy, maxNewTokens: 12, stop: [], ...over };
}

describe('batched KV-cache generation', () => {
  it('KV-cache greedy decoding equals greedy decoding by full recomputation', async () => {
    const prompts = [[256, 10, 20, 30], [256, 1, 2, 3, 4, 5, 6, 7, 8], [256, 99]];
    const results = await engine.generate(prompts.map((p) => row({ promptIds: p, maxNewTokens: 10 })));
    const s = await session(buildDecoder(c, initDecoderWeights(c, 3)));
    for (const [i, p] of prompts.entries()) {
      const seq = [...p];
      const expected: number[] = [];
      for (let t = 0; t < 10; t++) {
        const [logits] = await fullLogits(s, c, [seq]);
        const next = argmax(logits[seq.length - 1]);
        expected.push(next);
        seq.push(next);
        if (next === 258 || next === 256) break;
      }
      expect(results[i].tokenIds).toEqual(expected);
      expect(results[i].promptTokens).toBe(p.length);
      expect(results[i].completionTokens).toBe(expected.length);
    }
  });

  it('seeded sampling reproduces, differs by seed, and does not depend on the batch', async () => {
    const sampled = (seed: number) => row({ sampling: { temperature: 1.5, topP: 0.95, topK: 50, seed }, maxNewTokens: 16 });
    const [a] = await engine.generate([sampled(1)]);
    const [b] = await engine.generate([sampled(1)]);
    const batch = await engine.generate([sampled(2), row({ promptIds: [256, 7, 7, 7, 7, 7, 7] }), sampled(1)]);
    expect(b.tokenIds).toEqual(a.tokenIds);
    expect(batch[2].tokenIds).toEqual(a.tokenIds);
    expect(batch[0].tokenIds).not.toEqual(a.tokenIds);
  });

  it('top-k 1 is greedy; an allowed-token mask is obeyed', async () => {
    const [g] = await engine.generate([row()]);
    const [k1] = await engine.generate([row({ sampling: { temperature: 1, topP: 1, topK: 1, seed: 9 } })]);
    expect(k1.tokenIds).toEqual(g.tokenIds);
    const allowed = [48, 49, 50, 51]; // "0".."3"
    const [masked] = await engine.generate([row({ allowedTokenIds: allowed, sampling: { temperature: 1, topP: 1, topK: 0, seed: 4 }, maxNewTokens: 20 })]);
    expect(masked.tokenIds.every((t) => allowed.includes(t) || t === 258 || t === 256)).toBe(true);
    expect(masked.text).toMatch(/^[0-3]*$/);
  });

  it('stops at a stop string (text cut before it) and at max new tokens', async () => {
    const abc = { maxNewTokens: 12, allowedTokenIds: [97, 98, 99] };
    // the first seed whose sample runs to the token budget (end-of-sequence is always allowed)
    let seed = 0;
    let free = (await engine.generate([row({ ...abc, sampling: { temperature: 1, topP: 1, topK: 0, seed } })]))[0];
    while (free.finishReason !== 'length') free = (await engine.generate([row({ ...abc, sampling: { temperature: 1, topP: 1, topK: 0, seed: ++seed } })]))[0];
    expect(free.completionTokens).toBe(12);
    const stopAt = free.text.slice(3, 5);
    const [stopped] = await engine.generate([row({ ...abc, stop: [stopAt], sampling: { temperature: 1, topP: 1, topK: 0, seed } })]);
    expect(stopped.finishReason).toBe('stop');
    expect(stopped.text).toBe(free.text.slice(0, free.text.indexOf(stopAt)));
  });

  it('chat messages go through the chat template; an aborted row finishes as abort', async () => {
    const [r] = await engine.generate([row({ promptIds: undefined, messages: [{ role: 'user', content: 'hi' }], maxNewTokens: 3 })]);
    expect(r.promptTokens).toBe(engine.countTokens([{ role: 'user', content: 'hi' }]));
    // <|im_start|> "user\nhi" <|im_end|> "\n" <|im_start|> "assistant\n": byte-level, one token per byte
    expect(r.promptTokens).toBe(1 + 7 + 1 + 1 + 1 + 10);
    const ac = new AbortController();
    ac.abort();
    const [aborted] = await engine.generate([row({ signal: ac.signal })]);
    expect(aborted.finishReason).toBe('abort');
  });

  it('context policy: error by default, left-truncation when configured', async () => {
    const long = Array.from({ length: c.max_position_embeddings }, (_, i) => i % 200);
    await expect(engine.generate([row({ promptIds: long, maxNewTokens: 4 })])).rejects.toBeInstanceOf(ContextLengthError);
    const truncating = await createEngine({ model: { preset: 'tiny', seed: 3 }, mode: 'full', contextPolicy: 'truncate-left' });
    const [r] = await truncating.generate([row({ promptIds: long, maxNewTokens: 4 })]);
    expect(r.promptTokens).toBe(c.max_position_embeddings - 4);
    expect(r.completionTokens).toBe(4);
    await truncating.close();
  });
});
