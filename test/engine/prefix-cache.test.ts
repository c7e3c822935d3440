/**
 * The per-member prefix KV cache: the cache itself (longest prefix, capped; owners; budget and LRU), and
 * engines that decode multi-turn conversations (each turn's chat-template prompt appends to the last)
 * with the cache token for token like engines without it — full mode (θ as inputs and rebuild-session),
 * low-rank mode, base and members in one call, small budgets that evict, an fp16 export (fp16 K/V), a
 * tied real-vocabulary family model and PyTorch's own export — while K/V never cross members, θ versions
 * or populations.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ask } from '../../shared/es.ts';
import type { ChatMessage } from '../../shared/ports/policy.ts';
import type { EngineOptions, GenerateResult, MemberSelector, Population } from '../../trainer/engine/engine.ts';
import { PrefixCache, type KvBlock } from '../../trainer/engine/generation/prefix-cache.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from '../../trainer/engine/model/byte-tokenizer.ts';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { logitsAtLastPosition } from '../../trainer/engine/model/logits-last.ts';
import { loadModelDir, saveModelDir, type LoadedModel } from '../../trainer/engine/model/model-dir.ts';
import { ModelPolicy } from '../../trainer/engine/model/model-policy.ts';
import type { OnnxEngine } from '../../trainer/engine/model/onnx-engine.ts';
import { buildPreset } from '../../trainer/engine/model/open-model.ts';
import type { PresetName } from '../../trainer/engine/model/presets.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { toHalfExport } from './helpers/exporter-style.ts';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const greedy = { temperature: 0, topP: 1, topK: 0, seed: 0 };
const population: Population = { runSeed: 5, iteration: 2, sigma: 0.3, rank: 2, members: ask({ population: 4, antithetic: true }) };
const member = (index: number): MemberSelector => ({ kind: 'member', iteration: 2, index });

/** A block of `tokens` with one layer of 1 head × 1 dim, fp32 (4 bytes a token for keys and for values). */
const block = (tokens: number[]): KvBlock => ({ tokens, layers: [{ key: Float32Array.from(tokens), value: Float32Array.from(tokens) }] });

describe('PrefixCache', () => {
  it('serves the longest common prefix of the owner’s entries, capped one short of the prompt', () => {
    const cache = new PrefixCache(1 << 20);
    cache.store('a', block([1, 2, 3, 4, 5]));
    cache.store('a', block([1, 2, 9]));
    expect(cache.lookup('a', [1, 2, 3, 4, 5, 6, 7])?.length).toBe(5);
    expect(cache.lookup('a', [1, 2, 9, 9])?.length).toBe(3);
    expect(cache.lookup('a', [1, 2, 3, 4, 5])?.length).toBe(4); // the last prompt token is always fed
    expect(cache.lookup('a', [1, 2, 3, 7])).toMatchObject({ length: 3, block: { tokens: [1, 2, 3, 4, 5] } });
    expect(cache.lookup('a', [7, 1, 2])).toBeNull();
    expect(cache.lookup('a', [1])).toBeNull();
    expect(cache.lookup('b', [1, 2, 3, 4, 5, 6])).toBeNull(); // other owners' entries are never looked at
  });

  it('an entry that extends others replaces them; one that an entry extends is not stored again', () => {
    const cache = new PrefixCache(1 << 20);
    cache.store('a', block([1, 2]));
    cache.store('a', block([1, 2, 3, 4]));
    expect([cache.size, cache.bytes]).toEqual([1, 32]);
    cache.store('a', block([1, 2, 3]));
    expect([cache.size, cache.bytes]).toEqual([1, 32]);
    cache.store('b', block([1, 2, 3]));
    expect([cache.size, cache.bytes]).toEqual([2, 56]);
  });

  it('keeps its bytes within the budget, least recently used out first; skips blocks over the budget', () => {
    const cache = new PrefixCache(100); // 8 bytes a token
    cache.store('a', block([1, 1, 1, 1, 1]));
    cache.store('b', block([2, 2, 2, 2, 2]));
    expect(cache.lookup('a', [1, 1, 1, 1, 1, 1])?.length).toBe(5); // a is now the more recent
    cache.store('c', block([3, 3, 3, 3, 3]));
    expect(cache.bytes).toBeLessThanOrEqual(100);
    expect(cache.lookup('b', [2, 2, 2, 2, 2, 2])).toBeNull();
    expect(cache.lookup('a', [1, 1, 1, 1, 1, 1])?.length).toBe(5);
    cache.store('d', block(Array.from({ length: 13 }, () => 4)));
    expect(cache.lookup('d', [4, 4, 4])).toBeNull();
    expect(cache.size).toBe(2);
    cache.evictWhere((owner) => owner === 'a');
    expect([cache.size, cache.bytes]).toEqual([1, 40]);
    cache.clear();
    expect([cache.size, cache.bytes]).toEqual([0, 0]);
    expect(() => new PrefixCache(-1)).toThrow(/prefixCacheBytes must be an integer ≥ 0/);
  });
});

/** One episode's turn: the prompt it decoded from and what came back. */
interface Turn {
  promptIds: number[];
  result: GenerateResult;
}

/**
 * Conversations, one per selector, played together for `turns` turns: every turn is one engine call with
 * a row per conversation (budgets differ, so rows finish at different steps), and each conversation then
 * appends the reply and a new user message, rendered again by the chat template.
 */
async function converse(engine: OnnxEngine, who: MemberSelector[], turns: number, budget = (i: number) => 5 + 3 * i): Promise<Turn[][]> {
  const chats: ChatMessage[][] = who.map((_, i) => [
    { role: 'system', content: 'You play a board game. Answer with one move.' },
    { role: 'user', content: `Game ${i}. The board is empty. Your move?` },
  ]);
  const played: Turn[][] = [];
  for (let t = 0; t < turns; t++) {
    const prompts = chats.map((c) => engine.encodeChat(c));
    const results = await engine.generate(who.map((m, i) => ({ promptIds: prompts[i], member: m, sampling: greedy, maxNewTokens: budget(i), stop: [] })));
    played.push(results.map((result, i) => ({ promptIds: prompts[i], result })));
    results.forEach((r, i) => chats[i].push({ role: 'assistant', content: r.text }, { role: 'user', content: `Move ${t + 1} noted (${'xo'.repeat(i + 1)}). Next?` }));
  }
  return played;
}

const tokensOf = (played: Turn[][]) => played.map((turn) => turn.map((x) => x.result.tokenIds));

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/**
 * Each turn's cachedTokens against what the last turn of the same conversation left: its prompt and
 * completion, the last completion token included only if the row was fed it (another row still decoding).
 */
function expectCachedAsLeft(played: Turn[][]): void {
  played.forEach((turn, t) =>
    turn.forEach(({ promptIds, result }, i) => {
      if (t === 0) return expect(result.cachedTokens).toBe(0);
      const last = played[t - 1][i];
      expect(promptIds.slice(0, last.promptIds.length)).toEqual(last.promptIds); // the conversation appends
      const left = [...last.promptIds, ...last.result.tokenIds];
      const lo = Math.min(commonPrefix(left.slice(0, -1), promptIds), promptIds.length - 1);
      const hi = Math.min(commonPrefix(left, promptIds), promptIds.length - 1);
      expect(result.cachedTokens).toBeGreaterThanOrEqual(Math.max(lo, last.promptIds.length));
      expect(result.cachedTokens).toBeLessThanOrEqual(hi);
    }),
  );
}

/** An engine over a fresh copy of the model (updates write θ in place). */
async function engineOf(model: () => LoadedModel, options: Partial<EngineOptions>): Promise<OnnxEngine> {
  const engine = await createOnnxEngine(model(), { model: { preset: 'tiny', seed: 0 }, mode: 'full', ...options });
  engine.setPopulation(population);
  return engine;
}

/** The same conversations with and without the cache: identical tokens, and the cache's counts as expected. */
async function sameWithCache(model: () => LoadedModel, options: Partial<EngineOptions>, who: MemberSelector[], turns: number): Promise<Turn[][]> {
  const [cached, plain] = await Promise.all([engineOf(model, options), engineOf(model, { ...options, prefixCacheBytes: 0 })]);
  try {
    const withCache = await converse(cached, who, turns);
    const without = await converse(plain, who, turns);
    expect(tokensOf(withCache)).toEqual(tokensOf(without));
    expect(without.flat().every((x) => x.result.cachedTokens === 0)).toBe(true);
    return withCache;
  } finally {
    await Promise.all([cached.close(), plain.close()]);
  }
}

const preset = (name: PresetName, seed: number) => () => buildPreset(name, seed);
const everyone = [{ kind: 'base' } as const, member(0), member(1), member(3), member(0)];

describe('multi-turn conversations decode the same with the cache', () => {
  it.each([
    ['full mode, θ as inputs', { mode: 'full', fullModeWeights: 'inputs' }],
    ['full mode, rebuild-session, 2 rows a batch', { mode: 'full', fullModeWeights: 'rebuild-session', maxBatch: 2 }],
    ['low-rank mode', { mode: 'lowrank' }],
  ] as Array<[string, Partial<EngineOptions>]>)('%s: base and members, tiny', { timeout: 30_000 }, async (_, options) => {
    const played = await sameWithCache(preset('tiny', 3), options, everyone, 5);
    expectCachedAsLeft(played);
    // every later turn was served most of its prompt from the cache
    for (const turn of played.slice(1)) for (const { result } of turn) expect(result.cachedTokens / result.promptTokens).toBeGreaterThan(0.5);
  });

  it('low-rank mode, small preset', { timeout: 30_000 }, async () => {
    expectCachedAsLeft(await sameWithCache(preset('small', 1), { mode: 'lowrank' }, [{ kind: 'base' }, member(2), member(3)], 3));
  });

  it('a row alone in its batch leaves its prompt and every completion token but the last', { timeout: 30_000 }, async () => {
    const played = await sameWithCache(preset('tiny', 4), { mode: 'lowrank' }, [member(1)], 4);
    for (let t = 1; t < played.length; t++) {
      const [last, now] = [played[t - 1][0], played[t][0]];
      const left = [...last.promptIds, ...last.result.tokenIds.slice(0, -1)];
      expect(now.result.cachedTokens).toBe(Math.min(commonPrefix(left, now.promptIds), now.promptIds.length - 1));
    }
  });

  it('a budget that holds about one conversation evicts, within budget, and decodes the same', { timeout: 30_000 }, async () => {
    const budget = 160 * 1024; // tiny: 2 layers × K and V × 64 floats = 1 KiB a token
    const engine = await engineOf(preset('tiny', 3), { mode: 'lowrank', prefixCacheBytes: budget });
    const plain = await engineOf(preset('tiny', 3), { mode: 'lowrank', prefixCacheBytes: 0 });
    try {
      const played = await converse(engine, everyone, 4);
      expect(engine.prefixCacheUsage.bytes).toBeLessThanOrEqual(budget);
      expect(engine.prefixCacheUsage.entries).toBeGreaterThan(0);
      expect(tokensOf(played)).toEqual(tokensOf(await converse(plain, everyone, 4)));
      const later = played.slice(1).flat().map((x) => x.result.cachedTokens);
      expect(later.some((n) => n === 0)).toBe(true); // evicted before its next turn
      expect(later.some((n) => n > 0)).toBe(true);
    } finally {
      await Promise.all([engine.close(), plain.close()]);
    }
  });
});

describe('the context bounds a batch with prefixes', () => {
  it('prefixes that would widen a batch past the context are left out: whole prompts, as without the cache', { timeout: 30_000 }, async () => {
    const engine = await engineOf(preset('tiny', 3), { mode: 'lowrank' });
    const plain = await engineOf(preset('tiny', 3), { mode: 'lowrank', prefixCacheBytes: 0 });
    try {
      const long = (text: string) => engine.encodeChat([{ role: 'user', content: text.repeat(90) }]); // 360 of tiny's 512 positions
      const row = (promptIds: number[], who: MemberSelector) => ({ promptIds, member: who, sampling: greedy, maxNewTokens: 8, stop: [], ignoreEos: true });
      const rows = [row(long('abcd'), member(0)), row(long('wxyz'), member(1))];
      await engine.generate(rows.slice(0, 1));
      // member 0's 370-odd cached tokens + member 1's uncached 370 would span more than 512 positions
      const [together, want] = [await engine.generate(rows), await plain.generate(rows)];
      expect(together.map((r) => r.cachedTokens)).toEqual([0, 0]);
      expect(together.map((r) => r.tokenIds)).toEqual(want.map((r) => r.tokenIds));
      const [alone] = await engine.generate(rows.slice(0, 1));
      expect(alone.cachedTokens).toBe(rows[0].promptIds.length - 1);
    } finally {
      await Promise.all([engine.close(), plain.close()]);
    }
  });
});

describe('what the cache serves never crosses weights', () => {
  it.each([
    ['full, θ as inputs', { mode: 'full' }],
    ['full, rebuild-session', { mode: 'full', fullModeWeights: 'rebuild-session' }],
    ['low-rank', { mode: 'lowrank' }],
  ] as Array<[string, Partial<EngineOptions>]>)('%s: members, θ versions and populations', { timeout: 30_000 }, async (_, options) => {
    const engine = await engineOf(preset('tiny', 6), options);
    const plain = await engineOf(preset('tiny', 6), { ...options, prefixCacheBytes: 0 });
    const prompt = engine.encodeChat([{ role: 'user', content: 'Same prompt for everyone, please continue it.' }]);
    const on = (e: OnnxEngine, who: MemberSelector) => e.generate([{ promptIds: prompt, member: who, sampling: greedy, maxNewTokens: 8, stop: [], ignoreEos: true }]).then(([r]) => r);
    const same = async (who: MemberSelector, cachedTokens: number) => {
      const [got, want] = [await on(engine, who), await on(plain, who)];
      expect(got.tokenIds).toEqual(want.tokenIds);
      expect(got.cachedTokens).toBe(cachedTokens);
      return got;
    };
    const all = prompt.length - 1;
    try {
      // antithetic twins decode differently: a cache shared between them would show in their tokens
      const plus = await same(member(0), 0);
      const minus = await same(member(1), 0);
      expect(minus.tokenIds).not.toEqual(plus.tokenIds);
      await same({ kind: 'base' }, 0);
      await same(member(0), all);
      await same({ kind: 'base' }, all);

      const update = { runSeed: 5, iteration: 2, rank: 2, coefficients: [{ noiseIndex: 0, coef: 0.5 }, { noiseIndex: 1, coef: -0.3 }] };
      await Promise.all([engine.applyUpdate(update), plain.applyUpdate(update)]);
      engine.setPopulation(population);
      plain.setPopulation(population);
      await same({ kind: 'base' }, 0);
      await same(member(0), 0);
      await same({ kind: 'base' }, all);
      await engine.commitUpdate();
      await same({ kind: 'base' }, 0);
      await engine.withRestoredWeights(() => undefined);
      await same({ kind: 'base' }, 0);
      // a new population (even the same draw) retires the members' entries, not θ's
      await same(member(2), 0);
      engine.setPopulation(population);
      plain.setPopulation(population);
      await same(member(2), 0);
      await same({ kind: 'base' }, all);
    } finally {
      await Promise.all([engine.close(), plain.close()]);
    }
  });

  it('ModelPolicy reports the cached prompt tokens of each turn', { timeout: 30_000 }, async () => {
    const engine = await engineOf(preset('tiny', 3), { mode: 'lowrank' });
    try {
      const policy = new ModelPolicy(engine, { member: member(1), episode: 0, maxNewTokens: 6, sampling: { temperature: 0, topP: 1, topK: 0 } });
      const chat: ChatMessage[] = [{ role: 'user', content: 'Your move?' }];
      const first = await policy.act(chat, { step: 0 });
      const second = await policy.act([...chat, { role: 'assistant', content: first.text }, { role: 'user', content: 'And now?' }], { step: 1 });
      expect(first.tokens.cached).toBe(0);
      expect(second.tokens.cached).toBeGreaterThanOrEqual(engine.encodeChat(chat).length);
      expect(second.tokens.cached).toBeLessThan(second.tokens.prompt);
    } finally {
      await engine.close();
    }
  });
});

describe('other graphs: fp16 K/V, a tied real-vocabulary family, PyTorch’s export', () => {
  it('an fp16 export (fp16 KV caches), full and low-rank mode', { timeout: 30_000 }, async () => {
    const c: ModelConfig = {
      model_type: 'llama', vocab_size: 260, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4,
      num_key_value_heads: 2, max_position_embeddings: 512, rms_norm_eps: 1e-6, tie_word_embeddings: true, eos_token_id: 257, torch_dtype: 'float16',
    };
    // scaled up so the logits have margins fp16 keeps (the 0.02 init makes near-ties)
    const weights = initDecoderWeights(c, 11).map((w) => ({ ...w, data: w.dims.length === 2 ? w.data.map((v) => v * 4) : w.data }));
    const dir = mkdtempSync(join(tmpdir(), 'esopt-prefix-fp16-'));
    dirs.push(dir);
    saveModelDir(dir, { config: c, graph: toHalfExport(buildDecoder(c, weights), 'fp16'), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
    for (const mode of ['full', 'lowrank'] as const) expectCachedAsLeft(await sameWithCache(() => loadModelDir(dir), { mode }, [{ kind: 'base' }, member(0), member(1)], 3));
  });

  it('llama 3 (GQA, tied head, real tokenizer and chat template), low-rank and full mode', { timeout: 60_000 }, async () => {
    const c: ModelConfig = {
      model_type: 'llama', vocab_size: 128256, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2,
      max_position_embeddings: 1024, rms_norm_eps: 1e-6, tie_word_embeddings: true, rope_theta: 500000, bos_token_id: 128000, eos_token_id: [128001, 128009], torch_dtype: 'float32',
    };
    const files = join('node_modules', '@lenml', 'tokenizer-llama3', 'models');
    const dir = mkdtempSync(join(tmpdir(), 'esopt-prefix-llama3-'));
    dirs.push(dir);
    saveModelDir(dir, {
      config: c,
      graph: buildDecoder(c, initDecoderWeights(c, 3)),
      tokenizerJson: JSON.parse(readFileSync(join(files, 'tokenizer.json'), 'utf8')),
      tokenizerConfig: JSON.parse(readFileSync(join(files, 'tokenizer_config.json'), 'utf8')),
    });
    const loaded = loadModelDir(dir);
    // each engine gets its own θ and a graph over it (updates and switches write θ in place)
    const copy = () => {
      const weights = loaded.weights.map((w) => ({ ...w, data: Float32Array.from(w.data) }));
      const graph = buildDecoder(c, weights);
      logitsAtLastPosition(graph); // as the loader does
      return { ...loaded, weights, graph };
    };
    for (const mode of ['lowrank', 'full'] as const) {
      const played = await sameWithCache(copy, { mode }, [{ kind: 'base' }, member(0), member(3)], 3);
      expectCachedAsLeft(played);
      expect(played[2].every((x) => x.result.cachedTokens > played[1][0].promptIds.length / 2)).toBe(true);
    }
  });

  it('an export by torch.onnx.export: prompts that append, full and low-rank mode', { timeout: 30_000 }, async () => {
    const dir = join(import.meta.dirname, '..', 'fixtures', 'torch-llama-tied');
    for (const mode of ['full', 'lowrank'] as const) {
      const [cached, plain] = await Promise.all([engineOf(() => loadModelDir(dir), { mode }), engineOf(() => loadModelDir(dir), { mode, prefixCacheBytes: 0 })]);
      try {
        const run = async (e: OnnxEngine) => {
          const prompts = [[256, 10, 20, 30], [256, 40, 41], [256, 7]];
          const out: GenerateResult[][] = [];
          for (let t = 0; t < 4; t++) {
            const rs = await e.generate(prompts.map((p, i) => ({ promptIds: p, member: i === 0 ? { kind: 'base' as const } : member(i), sampling: greedy, maxNewTokens: 3 + 2 * i, stop: [], ignoreEos: true })));
            rs.forEach((r, i) => prompts[i].push(...r.tokenIds, 100 + t, 101 + i));
            out.push(rs);
          }
          return out;
        };
        const [got, want] = [await run(cached), await run(plain)];
        expect(got.map((t) => t.map((r) => r.tokenIds))).toEqual(want.map((t) => t.map((r) => r.tokenIds)));
        expect(got.slice(1).every((t) => t.every((r) => r.cachedTokens > 0))).toBe(true);
      } finally {
        await Promise.all([cached.close(), plain.close()]);
      }
    }
  });
});
