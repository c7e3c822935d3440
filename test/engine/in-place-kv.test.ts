/**
 * Caches that grow in place (trainer/engine/model/fused-attention.ts, engine/generation/kv-layout.ts): engines over the
 * fused graph decode greedy tokens identical to engines over the unfused graph at `tiny` and `small`, in
 * full mode (θ as inputs, rebuild-session) and low-rank mode, with grouped-query attention and a tied head,
 * base and members in one batch, rows of different prompt lengths and budgets (right padding and
 * seqlens_k against left padding and the attention mask), buffers that grow, and conversation turns served
 * from the prefix cache; `qwen3-0.6b-shape`'s graph fuses (its tokens are compared by `esopt bench
 * context`, too slow for a test); the fused step returns only the tokens it fed, which land in the buffers
 * fed as the past; and graphs the rewrite does not cover fall back to the unfused graph, saying why (PyTorch
 * exports: test/engine/fused-export.test.ts).
 */
import { afterAll, describe, expect, it } from 'vitest';
import * as ort from 'onnxruntime-node';
import { ask } from '../../shared/es.ts';
import type { EngineOptions, GenerateRow, MemberSelector, Population } from '../../trainer/engine/engine.ts';
import { decodeBatch } from '../../trainer/engine/generation/decode-loop.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { fuseAttention, LOGITS_INDEX, SEQLENS_K, stepOutput } from '../../trainer/engine/model/fused-attention.ts';
import type { LoadedModel } from '../../trainer/engine/model/model-dir.ts';
import type { OnnxEngine } from '../../trainer/engine/model/onnx-engine.ts';
import { buildPreset } from '../../trainer/engine/model/open-model.ts';
import { PRESETS, type PresetName } from '../../trainer/engine/model/presets.ts';
import { createSession } from '../../trainer/engine/model/sessions.ts';
import { decodeContext } from '../../trainer/studies/bench/decode-context.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { logitsAtLastPosition } from '../../trainer/engine/model/logits-last.ts';
import { decoderTensorSpecs, initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { ChatTokenizer } from '../../trainer/engine/model/chat-tokenizer.ts';
import { byteTokenizerConfig, byteTokenizerJson } from '../../trainer/engine/model/byte-tokenizer.ts';
import { headDim } from '../../trainer/engine/model/config.ts';

const greedy = { temperature: 0, topP: 1, topK: 0, seed: 0 };
const population: Population = { runSeed: 11, iteration: 1, sigma: 0.5, rank: 2, members: ask({ population: 4, antithetic: true }) };
const member = (index: number): MemberSelector => ({ kind: 'member', iteration: 1, index });
const engines: OnnxEngine[] = [];
afterAll(() => Promise.all(engines.map((e) => e.close())));

async function engineOf(model: LoadedModel, options: Partial<EngineOptions>): Promise<OnnxEngine> {
  const engine = await createOnnxEngine(model, { model: { preset: 'tiny', seed: 0 }, mode: 'full', ...options });
  engines.push(engine);
  engine.setPopulation(population);
  return engine;
}

/** Prompts of different lengths (1 to 29 tokens) and budgets, so rows pad differently and finish apart. */
function rows(who: MemberSelector[], vocab = 250): Array<GenerateRow & { promptIds: number[] }> {
  return who.map((m, i) => ({
    promptIds: [256, ...Array.from({ length: (i * 7) % 29 }, (_, j) => (i * 31 + j * 17) % vocab)],
    member: m,
    sampling: greedy,
    maxNewTokens: 4 + ((i * 5) % 9),
    stop: [],
    ignoreEos: true,
  }));
}

/** The same rows through a fused and an unfused engine over fresh copies of one model. */
async function sameTokens(model: () => LoadedModel, options: Partial<EngineOptions>, who: MemberSelector[]): Promise<void> {
  const fused = await engineOf(model(), { ...options, inPlaceKv: true });
  const plain = await engineOf(model(), { ...options, inPlaceKv: false });
  expect(fused.kvCache).toEqual({ inPlace: true });
  expect(plain.kvCache.inPlace).toBe(false);
  const a = await fused.generate(rows(who));
  const b = await plain.generate(rows(who));
  expect(a.map((r) => r.tokenIds)).toEqual(b.map((r) => r.tokenIds));
  expect(a.map((r) => r.completionTokens)).toEqual(rows(who).map((r) => r.maxNewTokens));
}

const everyone: MemberSelector[] = [{ kind: 'base' }, member(0), member(1), member(2), member(3), { kind: 'base' }];

describe('greedy tokens with and without the in-place caches', () => {
  it.each([
    ['tiny', 'full mode, θ as inputs', { mode: 'full', fullModeWeights: 'inputs' }],
    ['tiny', 'full mode, rebuild-session', { mode: 'full', fullModeWeights: 'rebuild-session' }],
    ['tiny', 'low-rank mode', { mode: 'lowrank' }],
    ['small', 'full mode, θ as inputs', { mode: 'full', fullModeWeights: 'inputs' }],
    ['small', 'low-rank mode, 4 rows a batch', { mode: 'lowrank', maxBatch: 4 }],
  ] as Array<[PresetName, string, Partial<EngineOptions>]>)('%s, %s', { timeout: 60_000 }, async (preset, _, options) => {
    // at small, fewer rows (and in full mode, which switches θ per member, two members) keep the case fast
    const who = preset === 'tiny' ? everyone : options.mode === 'full' ? [everyone[0], everyone[2], everyone[3]] : everyone.slice(0, 4);
    await sameTokens(() => buildPreset(preset, 3), options, who);
  });

  it('buffers that grow as rows decode past their first length, rows finishing apart', { timeout: 60_000 }, async () => {
    const fused = await engineOf(buildPreset('tiny', 6), { mode: 'lowrank', inPlaceKv: true });
    const plain = await engineOf(buildPreset('tiny', 6), { mode: 'lowrank', inPlaceKv: false });
    const long = rows([member(0), { kind: 'base' }, member(3)]).map((r, i) => ({ ...r, maxNewTokens: [150, 20, 90][i] }));
    const [a, b] = [await fused.generate(long), await plain.generate(long)];
    expect(a.map((r) => r.tokenIds)).toEqual(b.map((r) => r.tokenIds));
    expect(a.map((r) => r.completionTokens)).toEqual([150, 20, 90]);
  });

  it('grouped-query attention (2 KV heads for 4) with a tied head, both modes', { timeout: 60_000 }, async () => {
    const config = { ...PRESETS.tiny, num_key_value_heads: 2, tie_word_embeddings: true };
    const model = (): LoadedModel => {
      const weights = initDecoderWeights(config, 7);
      const graph = buildDecoder(config, weights);
      logitsAtLastPosition(graph);
      return { dir: 'tiny, grouped and tied', config, tokenizer: new ChatTokenizer(byteTokenizerJson(), byteTokenizerConfig()), graph, weights };
    };
    for (const mode of ['lowrank', 'full'] as const) await sameTokens(model, { mode }, everyone);
  });

  it('a graph whose head computes every position (no logits-last cut): each row read at its own last', { timeout: 60_000 }, async () => {
    const model = (): LoadedModel => {
      const config = PRESETS.tiny;
      const weights = initDecoderWeights(config, 8);
      return { dir: 'tiny, every position', config, tokenizer: new ChatTokenizer(byteTokenizerJson(), byteTokenizerConfig()), graph: buildDecoder(config, weights), weights };
    };
    const fused = fuseAttention(model().graph, PRESETS.tiny);
    expect(fused.fused && fused.model.graph.input.some((i) => i.name === LOGITS_INDEX)).toBe(false);
    await sameTokens(model, { mode: 'lowrank' }, everyone);
  });

  // several rows prefill their rests over cached pasts a token a run; one row, in one run
  it.each([
    ['lowrank', 'three rows'],
    ['full', 'three rows'],
    ['lowrank', 'one row'],
  ] as const)('multi-turn conversations from the prefix cache decode the same, %s mode, %s', { timeout: 60_000 }, async (mode, count) => {
    {
      const fused = await engineOf(buildPreset('tiny', 5), { mode, inPlaceKv: true });
      const plain = await engineOf(buildPreset('tiny', 5), { mode, inPlaceKv: false, prefixCacheBytes: 0 });
      const who: MemberSelector[] = count === 'one row' ? [member(1)] : [{ kind: 'base' }, member(1), member(2)];
      let prompts = rows(who).map((r) => r.promptIds);
      for (let turn = 0; turn < 4; turn++) {
        const ask = (e: OnnxEngine) => e.generate(prompts.map((p, i) => ({ ...rows(who)[i], promptIds: p, maxNewTokens: 3 + i * 2 })));
        const [a, b] = [await ask(fused), await ask(plain)];
        expect(a.map((r) => r.tokenIds)).toEqual(b.map((r) => r.tokenIds));
        if (turn > 0) expect(a.every((r) => r.cachedTokens > 0)).toBe(true);
        prompts = prompts.map((p, i) => [...p, ...a[i].tokenIds, 10, 65 + turn + i, 10]);
      }
    }
  });
});

describe('the qwen3-0.6b-shape graph fuses', () => {
  it('its 28 layers become GroupQueryAttention over 16 query and 8 KV heads, without attention_mask', () => {
    // the rewrite reads the graph's form only: the preset's graph around empty weights, as preset-dir.ts builds it
    const c = PRESETS['qwen3-0.6b-shape'];
    const graph = buildDecoder(c, decoderTensorSpecs(c).map((s) => ({ name: s.name, dims: s.dims, data: new Float32Array(0) })));
    logitsAtLastPosition(graph);
    const fused = fuseAttention(graph, c);
    if (!fused.fused) throw new Error(fused.reason);
    const gqa = fused.model.graph.node.filter((n) => n.opType === 'GroupQueryAttention');
    expect(gqa.length).toBe(28);
    const attr = (name: string) => gqa[0].attribute.find((a) => a.name === name);
    expect([attr('num_heads')?.i, attr('kv_num_heads')?.i]).toEqual([16, 8]);
    expect(fused.model.graph.node.some((n) => n.opType === 'Softmax' || n.opType === 'Concat')).toBe(false);
    expect(fused.model.graph.input.some((i) => i.name === 'attention_mask')).toBe(false);
  });
});

describe('the fused step', () => {
  it('returns only the tokens it fed, which land in the buffers fed as the past at each row’s slots', { timeout: 60_000 }, async () => {
    const model = buildPreset('tiny', 2);
    const fused = fuseAttention(model.graph, model.config);
    if (!fused.fused) throw new Error(fused.reason);
    const inputs = fused.model.graph.input.map((i) => i.name);
    expect(inputs).toContain(SEQLENS_K);
    expect(inputs).toContain(LOGITS_INDEX);
    expect(inputs).not.toContain('attention_mask');
    expect(fused.model.graph.output.map((o) => o.name).filter((n) => n.startsWith('present.'))).toEqual([]);
    const session = await createSession(fused.model, {}, 'tiny');
    const D = headDim(model.config);
    const H = model.config.num_key_value_heads!;
    const pasts: ort.Tensor[] = [];
    const widths: number[] = [];
    let last: { step: Float32Array; seqlens: Int32Array; S: number } | null = null;
    const spy = {
      inputNames: session.inputNames,
      run: async (feeds: Record<string, ort.Tensor>) => {
        const past = feeds['past_key_values.1.value'];
        // what the last run returned sits in the buffer at each row's slots (row 1, head 0, its first token)
        if (last) {
          const M = past.dims[2];
          const slot = last.seqlens[1] - last.S + 1;
          expect((past.data as Float32Array).subarray((1 * H * M + slot) * D, (1 * H * M + slot + 1) * D)).toEqual(last.step.subarray(1 * H * last.S * D, (1 * H * last.S + 1) * D));
        }
        const out = await session.run(feeds);
        const step = out[stepOutput(1, 'value')];
        widths.push(step.dims[2]);
        last = { step: Float32Array.from(step.data as Float32Array), seqlens: feeds[SEQLENS_K].data as Int32Array, S: step.dims[2] };
        pasts.push(past);
        return out;
      },
    } as unknown as ort.InferenceSession;
    const ctx = { ...decodeContext(model), session: spy, extraFeeds: {} };
    const batch = rows([{ kind: 'base' }, { kind: 'base' }]).map(({ promptIds, sampling, maxNewTokens, stop }) => ({ promptIds, sampling, maxNewTokens, stop, ignoreEos: true }));
    await decodeBatch(ctx, batch);
    // one prefill as wide as the longest prompt, then a token a run; the same buffers every run
    expect(widths).toEqual([Math.max(...batch.map((r) => r.promptIds.length)), ...Array(widths.length - 1).fill(1)]);
    expect(pasts.every((t) => t === pasts[0])).toBe(true);
    await session.release();
  });
});

describe('falls back to the unfused graph, saying why', () => {
  // exports' attention (and what of it is refused, with the warning) is test/engine/fused-export.test.ts's
  it('a head_dim the kernel does not take, or when turned off', { timeout: 60_000 }, async () => {
    const off = await engineOf(buildPreset('tiny', 1), { mode: 'lowrank', inPlaceKv: false });
    expect(off.kvCache).toEqual({ inPlace: false, reason: expect.stringMatching(/turned off/) });
    // a head_dim the CPU kernel does not take
    const odd = buildPreset('tiny', 1);
    expect(fuseAttention(odd.graph, { ...odd.config, num_attention_heads: 16, num_key_value_heads: 16 })).toEqual({ fused: false, reason: expect.stringMatching(/head_dim 4 is not a multiple of 8/) });
  });
});
