/**
 * LoRA mode's engine on real onnxruntime sessions, at the tiny preset (untied head) and the PyTorch-exported
 * tied fixture: θ is the adapter vector initialised the PEFT way (B zero, so the base decodes as the plain
 * model), members θ ± σε decode in one batch with per-row adapters and give exactly the greedy tokens of a
 * plain full-mode engine whose weights are the merged W + (α/r)·(B·A)ᵀ, an update moves only the adapters
 * (the base weights' hash is unchanged) and the base row then decodes on the merged θ. On an fp16 export
 * the adapters are fed cast to fp16: θ_0's base row decodes as the plain model and members decode.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ask, type ParameterSegment } from '../../shared/es.ts';
import { initLoraAdapters, LoraOptions, mergeLora, type LoraLayout } from '../../shared/lora.ts';
import { memberAdapters } from '../../shared/lora-members.ts';
import type { LocalModelSpec } from '../../shared/schemas/index.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import type { Engine, GenerateRow, MemberSelector } from '../../trainer/engine/engine.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from '../../trainer/engine/model/byte-tokenizer.ts';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { createEngine, createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { saveModelDir } from '../../trainer/engine/model/model-dir.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { toHalfExport } from './helpers/exporter-style.ts';
import { loraMatrices } from '../../trainer/engine/model/lora-matrices.ts';
import { openModel } from '../../trainer/engine/model/open-model.ts';

const TIED = fileURLToPath(new URL('../fixtures/torch-llama-tied', import.meta.url));
const SEED = 5;

const flat = (segments: readonly ParameterSegment[]) => {
  const out = new Float32Array(segments.reduce((a, s) => a + s.data.length, 0));
  let at = 0;
  for (const s of segments) {
    out.set(s.data, at);
    at += s.data.length;
  }
  return out;
};

const row = (member: MemberSelector, promptIds: number[]): GenerateRow => ({ promptIds, member, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 10, stop: [], ignoreEos: true });

/** Greedy tokens of a full-mode engine of `model` whose weights are the merge of `adapters`, for each prompt. */
async function mergedTokens(full: Engine, base: Float32Array[], layout: LoraLayout, targets: number[], adapters: Float32Array, prompts: number[][]): Promise<number[][]> {
  await full.withRestoredWeights((segments) => {
    segments.forEach((s, i) => s.data.set(base[i]));
    layout.slots.forEach((slot, j) => segments[targets[j]].data.set(mergeLora(base[targets[j]], adapters, layout, slot)));
  });
  await full.commitUpdate();
  const out = await full.generate(prompts.map((p) => row({ kind: 'base' }, p)));
  return out.map((r) => r.tokenIds);
}

const cases: Array<[string, LocalModelSpec, number[][]]> = [
  ['the tiny preset', { preset: 'tiny', seed: 3 }, [[256, 72, 105], [256, 84, 119, 111]]],
  ['the tied PyTorch export', { dir: TIED }, [[1, 5, 9], [2, 7]]],
];

describe.each(cases)('%s', (_, spec, prompts) => {
  it('members decode in one batch as full-mode engines on the merged weights; an update moves only the adapters', async () => {
    const options = LoraOptions.parse({ rank: 4, alpha: 8, targets: 'all-linear' });
    const model = openModel(spec);
    const lora = await createOnnxEngine(model, { model: spec, mode: 'lora', lora: { ...options, seed: SEED } });
    const reference = openModel(spec);
    const full = await createOnnxEngine(reference, { model: spec, mode: 'full' });
    try {
      const { layout, targets } = loraMatrices(model, options);
      const targetIndex = targets.map((t) => t.weight);
      const base = reference.weights.map((w) => Float32Array.from(w.data));
      const baseHash = hashTheta(model.weights);

      // θ₀ is PEFT's init from the run seed: A drawn, B zero
      const theta0 = flat(lora.segments());
      expect(Buffer.from(theta0.buffer).equals(Buffer.from(initLoraAdapters(layout, SEED).buffer))).toBe(true);
      expect(lora.segments().filter((s) => s.name.endsWith('#lora_B')).every((s) => s.data.every((v) => v === 0))).toBe(true);
      expect(lora.targetTensors('all')).toEqual(layout.slots.map((s) => s.name));
      expect(layout.slots.length).toBe(14);

      /** Base and every member in one generate call, against a full-mode engine on each row's merged weights. */
      const compare = async (iteration: number) => {
        const p = { runSeed: 9, iteration, sigma: 0.6, rank: 1, members: ask({ population: 4, antithetic: true }) };
        lora.setPopulation(p);
        const theta = flat(lora.segments());
        const selectors: MemberSelector[] = [{ kind: 'base' }, ...p.members.map((m): MemberSelector => ({ kind: 'member', iteration, index: m.index }))];
        const got = (await lora.generate(selectors.flatMap((sel) => prompts.map((pr) => row(sel, pr))))).map((r) => r.tokenIds);
        const adapters = [theta, ...p.members.map((m) => memberAdapters(theta, layout, { runSeed: p.runSeed, iteration, member: m.noiseIndex }, m.sign * p.sigma))];
        const want: number[][][] = [];
        for (const a of adapters) want.push(await mergedTokens(full, base, layout, targetIndex, a, prompts));
        expect(got).toEqual(want.flat());
        // the members' tokens differ from each other and from the base, so a row on the wrong adapters would show
        expect(new Set(want.map((w) => JSON.stringify(w))).size).toBe(adapters.length);
        lora.setPopulation(null);
        return want[0];
      };

      // before any update the base row is the plain model: B = 0, so its merge is W itself
      const plain = await compare(1);
      await lora.applyUpdate({ runSeed: 9, iteration: 1, rank: 1, decay: 0.01, coefficients: [{ noiseIndex: 0, coef: 0.5 }, { noiseIndex: 1, coef: -0.4 }] });
      // the update wrote the adapters only: the base weights keep their hash, θ moved, B is no longer zero
      expect(hashTheta(model.weights)).toBe(baseHash);
      expect(Buffer.from(flat(lora.segments()).buffer).equals(Buffer.from(theta0.buffer))).toBe(false);
      expect(lora.segments().filter((s) => s.name.endsWith('#lora_B')).some((s) => s.data.some((v) => v !== 0))).toBe(true);
      const merged = await compare(2);
      expect(merged).not.toEqual(plain);
    } finally {
      await lora.close();
      await full.close();
    }
  }, 30_000);
});

describe('bad adapter targets', () => {
  it('a pattern that names no adapted matrix is an error at lora.targets, and a tied head is no LoRA matrix', async () => {
    const open = (spec: LocalModelSpec, targets: unknown) => createEngine({ model: spec, mode: 'lora', lora: { ...LoraOptions.parse({ rank: 2, alpha: 4, targets }), seed: 0 } });
    await expect(open({ preset: 'tiny', seed: 0 }, { include: ['q_proj', 'qproj'] })).rejects.toThrow(/^lora\.targets\.include\[1\]: "qproj" matches none of LoRA's matrices: model\.layers\.0\.self_attn\.q_proj\.weight/);
    await expect(open({ dir: TIED }, { include: ['embed_tokens'] })).rejects.toThrow(/^lora\.targets\.include\[0\]: "embed_tokens" matches none of LoRA's matrices/);
  });
});

describe('the stacks across populations, and W handed to the session', () => {
  const spec: LocalModelSpec = { preset: 'tiny', seed: 3 };
  const prompts = [[256, 72, 105], [256, 84]];

  it('a new population reuses the stacks for its own members; a population set mid-decode leaves that decode as it began', async () => {
    const options = LoraOptions.parse({ rank: 4, alpha: 8, targets: 'all-linear' });
    const model = openModel(spec);
    let onStep: (() => void) | null = null;
    const lora = await createOnnxEngine(model, { model: spec, mode: 'lora', lora: { ...options, seed: SEED }, onDecodeStep: () => onStep?.() });
    const reference = openModel(spec);
    const full = await createOnnxEngine(reference, { model: spec, mode: 'full' });
    try {
      const { layout, targets } = loraMatrices(model, options);
      const base = reference.weights.map((w) => Float32Array.from(w.data));
      // B ≠ 0, so both factors of every member differ from θ's
      await lora.applyUpdate({ runSeed: 9, iteration: 0, rank: 1, coefficients: [{ noiseIndex: 0, coef: 0.5 }, { noiseIndex: 1, coef: -0.4 }] });
      const theta = flat(lora.segments());
      const population = (iteration: number) => ({ runSeed: 9, iteration, sigma: 0.6, rank: 1, members: ask({ population: 4, antithetic: true }) });
      const rows = (iteration: number, p: ReturnType<typeof population>) => p.members.flatMap((m) => prompts.map((pr) => row({ kind: 'member', iteration, index: m.index }, pr)));
      const want = async (iteration: number, p: ReturnType<typeof population>) => {
        const out: number[][][] = [];
        for (const m of p.members) out.push(await mergedTokens(full, base, layout, targets.map((t) => t.weight), memberAdapters(theta, layout, { runSeed: 9, iteration, member: m.noiseIndex }, m.sign * p.sigma), prompts));
        return out.flat();
      };
      const p1 = population(1);
      const p2 = population(2);
      // the same population size: the second population writes its noise into the first's buffers
      lora.setPopulation(p1);
      expect((await lora.generate(rows(1, p1))).map((r) => r.tokenIds)).toEqual(await want(1, p1));
      lora.setPopulation(p2);
      const second = await want(2, p2);
      expect((await lora.generate(rows(2, p2))).map((r) => r.tokenIds)).toEqual(second);
      expect(second).not.toEqual(await want(1, p1));
      // a population set while a generate decodes (at its first step): that generate keeps its own stacks
      lora.setPopulation(p1);
      let set = 0;
      onStep = () => void (set++ === 0 && lora.setPopulation(p2));
      const running = await lora.generate(rows(1, p1));
      onStep = null;
      expect(set).toBeGreaterThan(1);
      expect(running.map((r) => r.tokenIds)).toEqual(await want(1, p1));
      expect((await lora.generate(rows(2, p2))).map((r) => r.tokenIds)).toEqual(second);
    } finally {
      await lora.close();
      await full.close();
    }
  }, 60_000);

  it('hands the large weights over to the session, which then decodes the plain model on its own copy', async () => {
    const small: LocalModelSpec = { preset: 'small', seed: 0 };
    const model = openModel(small);
    const large = model.weights.filter((w) => w.data.byteLength >= 1 << 20).map((w) => w.name);
    const kept = model.weights.filter((w) => w.data.byteLength < 1 << 20).map((w) => [w.name, hashTheta([w])]);
    expect(large.length).toBeGreaterThan(0);
    const lora = await createOnnxEngine(model, { model: small, mode: 'lora', lora: { ...LoraOptions.parse({ rank: 2, alpha: 4 }), seed: 0 } });
    const plain = await createEngine({ model: small, mode: 'full' });
    try {
      // the loader's copies of W are gone (detached), the small tensors untouched
      for (const name of large) expect(model.weights.find((w) => w.name === name)!.data.length, name).toBe(0);
      for (const [name, hash] of kept) expect(hashTheta([model.weights.find((w) => w.name === name)!]), name).toBe(hash);
      // θ₀'s B is zero: the session's own W decodes exactly as the plain model
      const tokens = (e: Engine) => e.generate(prompts.map((p) => row({ kind: 'base' }, p))).then((out) => out.map((r) => r.tokenIds));
      expect(await tokens(lora)).toEqual(await tokens(plain));
    } finally {
      await lora.close();
      await plain.close();
    }
  }, 60_000);
});

describe('an fp16 export', () => {
  const dir = mkdtempSync(join(tmpdir(), 'esopt-lora-fp16-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('decodes θ_0 as the plain model, and its members in one batch', async () => {
    const c: ModelConfig = {
      model_type: 'llama', vocab_size: 260, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4,
      num_key_value_heads: 2, max_position_embeddings: 64, rms_norm_eps: 1e-6, tie_word_embeddings: true, eos_token_id: 257, torch_dtype: 'float16',
    };
    saveModelDir(dir, { config: c, graph: toHalfExport(buildDecoder(c, initDecoderWeights(c, 11)), 'fp16'), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
    const lora = await createEngine({ model: { dir }, mode: 'lora', lora: { ...LoraOptions.parse({ rank: 2, alpha: 4 }), seed: 1 } });
    const plain = await createEngine({ model: { dir }, mode: 'full' });
    try {
      const prompts = [[256, 72, 105], [256, 84, 119, 111]];
      const base = (e: Engine) => e.generate(prompts.map((p) => row({ kind: 'base' }, p))).then((out) => out.map((r) => r.tokenIds));
      expect(await base(lora)).toEqual(await base(plain));
      const p = { runSeed: 3, iteration: 0, sigma: 0.5, rank: 1, members: ask({ population: 4, antithetic: true }) };
      lora.setPopulation(p);
      const out = await lora.generate(p.members.map((m) => row({ kind: 'member', iteration: 0, index: m.index }, prompts[0])));
      expect(out.map((o) => o.tokenIds.length)).toEqual([10, 10, 10, 10]);
      expect(new Set(out.map((o) => JSON.stringify(o.tokenIds))).size).toBeGreaterThan(1);
    } finally {
      await lora.close();
      await plain.close();
    }
  });
});
