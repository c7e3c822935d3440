/**
 * A tied LM head in the layouts PyTorch's exporter writes (the transposed embedding folded into a second
 * initializer, a Transpose of the embedding, a duplicate read through a Transpose) loads as one entry of
 * θ, and perturbation, restore and the update reach both uses, in full and low-rank mode.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ask, layoutSegments } from '../../shared/es.ts';
import { lowRankFactors } from '../../shared/lowrank.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from '../../trainer/engine/model/byte-tokenizer.ts';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { loadModelDir, saveModelDir } from '../../trainer/engine/model/model-dir.ts';
import { referenceForward } from '../../trainer/engine/model/reference-forward.ts';
import { tieHead } from '../../trainer/engine/model/tied-weights.ts';
import { initDecoderWeights, parameterCount } from '../../trainer/engine/model/weights.ts';
import { perturb } from '../../trainer/engine/perturbation/exact-perturbation.ts';
import { FactorCache, lowRankOffsets } from '../../trainer/engine/perturbation/lowrank-factors.ts';
import { lowRankRewrite } from '../../trainer/engine/perturbation/lowrank-graph.ts';
import type { NamedTensor } from '../../trainer/engine/onnx/named-tensor.ts';
import { foldTiedHead, type TiedStyle } from './helpers/exporter-style.ts';
import { argmax, fullLogits, maxAbsDiff, session } from './onnx-helpers.ts';

const c: ModelConfig = {
  model_type: 'llama', vocab_size: 260, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4,
  num_key_value_heads: 2, max_position_embeddings: 64, rms_norm_eps: 1e-6, tie_word_embeddings: true, eos_token_id: 257,
};
const weights = initDecoderWeights(c, 7);
const copy = (ws: readonly NamedTensor[]) => ws.map((w) => ({ ...w, data: Float32Array.from(w.data) }));
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function exported(style: TiedStyle, config: ModelConfig = c): string {
  const dir = mkdtempSync(join(tmpdir(), 'esopt-tied-'));
  dirs.push(dir);
  saveModelDir(dir, { config, graph: foldTiedHead(buildDecoder(c, copy(weights)), style), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
  return dir;
}

function referenceGreedy(ws: readonly NamedTensor[], prompt: number[], n: number): number[] {
  const ids = [...prompt];
  for (let i = 0; i < n; i++) ids.push(argmax(referenceForward(c, ws, ids, true)[0]));
  return ids.slice(prompt.length);
}

const prompt = [256, 72, 101, 108, 108, 111];
const row = { promptIds: prompt, member: { kind: 'base' as const }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 4, stop: [], ignoreEos: true };
const population = { runSeed: 9, iteration: 2, sigma: 0.2, rank: 2, members: ask({ population: 2, antithetic: true }) };

describe.each(['transposed-initializer', 'transpose-node', 'duplicate'] as const)('tied head exported as %s', (style) => {
  it('loads as one θ entry (θ count = parameter count) and decodes like the reference', async () => {
    const loaded = loadModelDir(exported(style));
    expect(loaded.weights.map((w) => w.name)).toEqual(weights.map((w) => w.name));
    expect(parameterCount(loaded.weights)).toBe(parameterCount(weights));
    expect(loaded.graph.graph.initializer.some((t) => t.name === 'onnx::MatMul_4321' || t.name === 'lm_head.weight')).toBe(false);
    const engine = await createOnnxEngine(loaded, { model: { dir: loaded.dir }, mode: 'full' });
    const [r] = await engine.generate([row]);
    expect(r.tokenIds).toEqual(referenceGreedy(weights, prompt, 4));
    await engine.close();
  });
});

describe('one tied θ entry in both modes', () => {
  it('full mode: a member decodes on θ + σε in both uses, restores exactly, and the update moves both uses', { timeout: 60_000 }, async () => {
    const loaded = loadModelDir(exported('transposed-initializer'));
    const engine = await createOnnxEngine(loaded, { model: { dir: loaded.dir }, mode: 'full' });
    try {
      engine.setPopulation(population);
      const member = population.members[1];
      const [m] = await engine.generate([{ ...row, member: { kind: 'member', iteration: 2, index: member.index } }]);
      const perturbed = copy(weights);
      perturb(layoutSegments(perturbed), { runSeed: 9, iteration: 2, member: member.noiseIndex }, member.sign * population.sigma);
      expect(m.tokenIds).toEqual(referenceGreedy(perturbed, prompt, 4));
      expect(m.tokenIds).not.toEqual(referenceGreedy(weights, prompt, 4));
      // restored bit for bit
      engine.segments().forEach((s, i) => expect(Buffer.compare(Buffer.from(s.data.buffer, s.data.byteOffset, s.data.byteLength), Buffer.from(weights[i].data.buffer)), s.name).toBe(0));
      await engine.applyUpdate({ runSeed: 9, iteration: 2, rank: 2, coefficients: [{ noiseIndex: 0, coef: 2 }] });
      const updated = await engine.withRestoredWeights((segs) => segs.map((s, i) => ({ ...weights[i], data: Float32Array.from(s.data) })));
      expect(maxAbsDiff(updated[0].data, weights[0].data)).toBeGreaterThan(1e-3);
      const [after] = await engine.generate([row]);
      expect(after.tokenIds).toEqual(referenceGreedy(updated, prompt, 4));
    } finally {
      await engine.close();
    }
  });

  it("low-rank mode: a member row's logits equal the dense model with E + (s·σ·A Bᵀ/√r)ᵀ in both uses", async () => {
    // the loader's rewrite on an exporter-style graph (without the loader's last-position logits)
    const graph = foldTiedHead(buildDecoder(c, copy(weights)), 'transposed-initializer');
    expect(tieHead(graph, c, 'model.onnx')).toEqual({ tied: true, embedding: 'model.embed_tokens.weight', removed: 'onnx::MatMul_4321', removedLayout: 'transposed' });
    const { model, targets, groups } = lowRankRewrite(graph, weights);
    const head = targets.find((t) => t.weight === 0)!;
    expect(head).toMatchObject({ name: 'model.embed_tokens.weight', m: 32, n: 260, transposed: true });
    const rowMembers = [null, population.members[0], population.members[1]];
    const logits = await fullLogits(await session(model), c, rowMembers.map(() => prompt), new FactorCache(targets, groups, population).feeds(rowMembers));
    const offsets = lowRankOffsets(targets, 2);
    for (const [b, member] of rowMembers.entries()) {
      const dense = copy(weights);
      if (member) {
        targets.forEach((t, j) => {
          const { A, B } = lowRankFactors({ runSeed: 9, iteration: 2, member: member.noiseIndex }, t.m, t.n, 2, offsets[j]);
          const W = dense[t.weight].data;
          const s = (member.sign * population.sigma) / Math.SQRT2;
          // W (m×n) += s·A Bᵀ, or its transpose for the tied table stored [n, m]
          for (let i = 0; i < t.m; i++) for (let k = 0; k < t.n; k++) W[t.transposed ? k * t.m + i : i * t.n + k] += s * (A[i * 2] * B[k * 2] + A[i * 2 + 1] * B[k * 2 + 1]);
        });
      }
      const [expected] = await fullLogits(await session(buildDecoder(c, dense)), c, [prompt]);
      for (let j = 0; j < prompt.length; j++) expect(maxAbsDiff(logits[b][j], expected[j])).toBeLessThan(2e-5);
    }
    expect(maxAbsDiff(logits[1][5], logits[0][5])).toBeGreaterThan(1e-3);
  });

  it('low-rank mode: the update folds into the one table and both uses decode like the reference', { timeout: 60_000 }, async () => {
    const loaded = loadModelDir(exported('transpose-node'));
    const engine = await createOnnxEngine(loaded, { model: { dir: loaded.dir }, mode: 'lowrank' });
    try {
      expect(engine.segments().length).toBe(weights.length);
      await engine.applyUpdate({ runSeed: 9, iteration: 2, rank: 2, coefficients: [{ noiseIndex: 0, coef: 3 }, { noiseIndex: 1, coef: -1 }] });
      const updated = await engine.withRestoredWeights((segs) => segs.map((s, i) => ({ ...weights[i], data: Float32Array.from(s.data) })));
      expect(maxAbsDiff(updated[0].data, weights[0].data)).toBeGreaterThan(1e-3);
      const [after] = await engine.generate([row]);
      expect(after.tokenIds).toEqual(referenceGreedy(updated, prompt, 4));
    } finally {
      await engine.close();
    }
  });
});

describe('tie_word_embeddings against the graph', () => {
  it('a folded tie the config calls untied stays two weights, with a warning saying so', () => {
    const graph = foldTiedHead(buildDecoder(c, copy(weights)), 'transposed-initializer');
    const result = tieHead(graph, { ...c, tie_word_embeddings: false }, '/m/model.onnx');
    expect(result.tied).toBe(false);
    expect(result.warning).toMatch(/LM head "onnx::MatMul_4321" equals the embedding "model.embed_tokens.weight" transposed, but \/m\/config.json says tie_word_embeddings: false/);
  });

  it('a config that says tied, over a head that is not the embedding, is an error naming both', () => {
    const graph = foldTiedHead(buildDecoder(c, copy(weights)), 'transposed-initializer');
    const head = graph.graph.initializer.find((t) => t.name === 'onnx::MatMul_4321')!;
    head.rawData = head.rawData!.slice();
    head.rawData[5] ^= 1;
    expect(() => tieHead(graph, c, '/m/model.onnx')).toThrow(/\/m\/config.json: tie_word_embeddings is true, but the LM head in \/m\/model.onnx reads "onnx::MatMul_4321", which is not the embedding "model.embed_tokens.weight"/);
  });
});
