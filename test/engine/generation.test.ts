import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine, GenerateRow } from '../../trainer/engine/engine.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { ContextLengthError } from '../../trainer/engine/model/onnx-engine.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { streamableLength } from '../../trainer/engine/generation/text-stream.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
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

  it('stops at the first step whose text holds a stop string, also across steps and inside multi-byte characters', async () => {
    // Tokens drawn from "a", "b" and the three bytes of "€": stop strings span several steps, and a token
    // may leave a character half done. The reference decodes the whole completion after every step.
    const bytes = [97, 98, 0xe2, 0x82, 0xac];
    const sampled = (seed: number, stop: string[] = []) => row({ maxNewTokens: 40, allowedTokenIds: bytes, ignoreEos: true, stop, sampling: { temperature: 1, topP: 1, topK: 0, seed } });
    const free = await engine.generate(Array.from({ length: 12 }, (_, seed) => sampled(seed)));
    // A piece of each free completion without broken characters, 1–4 characters long, and one that never comes.
    const stops = free.map((f, seed) => {
      const length = 1 + (seed % 4);
      const pieces = Array.from({ length: Math.max(0, f.text.length - length + 1) }, (_, i) => f.text.slice(i, i + length)).filter((p) => !p.includes('\uFFFD'));
      return [pieces[(seed * 7) % pieces.length] ?? 'ab', 'b€b€b€b€b€X'];
    });
    const stopped = await engine.generate(stops.map((stop, seed) => sampled(seed, stop)));
    // End-of-sequence stays allowed (and is ignored here): special tokens decode to nothing.
    const decode = (ids: number[]) => Buffer.from(ids.filter((id) => id < 256)).toString('utf8');
    let cutShort = 0;
    stopped.forEach((r, seed) => {
      const tokens = free[seed].tokenIds;
      const k = tokens.findIndex((_, i) => stops[seed].some((s) => decode(tokens.slice(0, i + 1)).includes(s)));
      expect(k, `seed ${seed}: the stop string comes in the free completion`).toBeGreaterThanOrEqual(0);
      const text = decode(tokens.slice(0, k + 1));
      const cut = Math.min(...stops[seed].map((s) => text.indexOf(s)).filter((i) => i >= 0));
      expect(r.tokenIds, `seed ${seed}`).toEqual(tokens.slice(0, k + 1));
      expect(r.text).toBe(text.slice(0, cut));
      expect(r.finishReason).toBe('stop');
      if (k + 1 < tokens.length) cutShort++;
    });
    expect(cutShort).toBeGreaterThan(6);
  });

  it('chat messages go through the chat template; an aborted row finishes as abort', async () => {
    const [r] = await engine.generate([row({ promptIds: undefined, messages: [{ role: 'user', content: 'hi' }], maxNewTokens: 3 })]);
    expect(r.promptTokens).toBe(engine.encodeChat([{ role: 'user', content: 'hi' }]).length);
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

describe('streaming pieces (onText)', () => {
  let lowrank: Engine;
  beforeAll(async () => {
    lowrank = await createEngine({ model: { preset: 'tiny', seed: 3 }, mode: 'lowrank' });
  });
  afterAll(() => lowrank.close());

  /** Runs `rows` with an onText hook on each, returning the results and every row's pieces. */
  async function streamed(e: Engine, rows: GenerateRow[]) {
    const pieces = rows.map(() => [] as string[]);
    const results = await e.generate(rows.map((r, i) => ({ ...r, onText: (d: string) => pieces[i].push(d) })));
    return { results, pieces };
  }
  const sampled = (seed: number, over: Partial<GenerateRow> = {}) => row({ sampling: { temperature: 1, topP: 1, topK: 0, seed }, ...over });

  it('pieces concatenate to the text; the hook changes nothing else, in full and low-rank mode', async () => {
    for (const e of [engine, lowrank]) {
      const rows = [sampled(1, { maxNewTokens: 16, allowedTokenIds: [97, 98, 99, 32], ignoreEos: true }), row({ maxNewTokens: 10 }), sampled(2, { maxNewTokens: 16 })];
      const plain = await e.generate(rows);
      const { results, pieces } = await streamed(e, rows);
      // the second call's prompts come from the prefix cache, which changes nothing else
      expect(results.map((r) => r.cachedTokens)).toEqual(rows.map((r) => r.promptIds!.length - 1));
      expect(results.map((r) => ({ ...r, cachedTokens: 0 }))).toEqual(plain.map((r) => ({ ...r, cachedTokens: 0 })));
      results.forEach((r, i) => expect(pieces[i].join('')).toBe(r.text));
      expect(pieces[0].length).toBeGreaterThan(1);
      expect(pieces.flat().every((p) => p.length > 0)).toBe(true);
    }
  });

  it('pieces arrive while the row is still decoding: aborting from the first piece cuts the row short', async () => {
    const ac = new AbortController();
    const events: string[] = [];
    const r = sampled(5, { maxNewTokens: 20, allowedTokenIds: [97, 98, 99], ignoreEos: true, signal: ac.signal });
    const [full] = await engine.generate([{ ...r, signal: undefined }]);
    expect(full.completionTokens).toBe(20);
    const done = engine.generate([{ ...r, onText: (d) => (events.push(`piece:${d}`), ac.abort()) }]).then((res) => (events.push('resolved'), res));
    const [cut] = await done;
    expect(cut.finishReason).toBe('abort');
    expect(cut.completionTokens).toBeLessThan(20);
    expect(events[0]).toMatch(/^piece:/);
    expect(events.at(-1)).toBe('resolved');
    expect(full.text.startsWith(cut.text)).toBe(true);
  });

  it('never splits a multi-byte character', async () => {
    // Only the bytes of "é" (C3 A9) and "€" (E2 82 AC): the samples mix whole characters with broken bytes.
    const bytes = [0xc3, 0xa9, 0xe2, 0x82, 0xac];
    const rows = Array.from({ length: 16 }, (_, seed) => sampled(seed, { maxNewTokens: 48, allowedTokenIds: bytes, ignoreEos: true }));
    const { results, pieces } = await streamed(engine, rows);
    const all = results.map((r) => r.text).join('');
    expect(all).toContain('é');
    expect(all).toContain('€');
    results.forEach((r, i) => {
      // A piece ending in half a character would show as U+FFFD where the final text has the whole one.
      expect(pieces[i].join('')).toBe(r.text);
      expect(pieces[i].length).toBeLessThan(r.completionTokens);
    });
  });

  it('never streams text a stop string cuts, and flushes a held-back partial stop at the end', async () => {
    const abc = { maxNewTokens: 24, allowedTokenIds: [97, 98, 99], ignoreEos: true };
    const [free] = await engine.generate([sampled(7, abc)]);
    const stop = free.text.slice(6, 9);
    const never = 'abcabcabcX'; // shares prefixes with the text but cannot be produced
    const { results, pieces } = await streamed(engine, [sampled(7, { ...abc, stop: [stop, never] }), sampled(7, { ...abc, stop: [never] })]);
    expect(results[0].finishReason).toBe('stop');
    expect(results[0].text).toBe(free.text.slice(0, free.text.indexOf(stop)));
    expect(pieces[0].join('')).toBe(results[0].text);
    expect(results[1].text).toBe(free.text);
    expect(pieces[1].join('')).toBe(free.text);
  });

  it('holds back exactly a trailing partial character or stop-string prefix', () => {
    expect(streamableLength('hello wor', ['world'])).toBe(6);
    expect(streamableLength('hello', ['world'])).toBe(5);
    expect(streamableLength('ab\uFFFD', [])).toBe(2);
    expect(streamableLength('ab\uFFFD', ['b€'])).toBe(1);
    expect(streamableLength('aaa', ['aaab', 'ab'])).toBe(0);
    expect(streamableLength('xyz', ['yz!', 'z'])).toBe(1);
  });
});
