/**
 * Optimum's merged decoder (`decoder_model_merged.onnx`, an If on use_cache_branch) loads by inlining its
 * with-past branch, and decodes and trains like the plain export; one it cannot inline is refused by name.
 */
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from '../../trainer/engine/model/byte-tokenizer.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { inlineCacheBranch } from '../../trainer/engine/model/merged-decoder.ts';
import { loadModelDir, saveModelDir } from '../../trainer/engine/model/model-dir.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { referenceForward } from '../../trainer/engine/model/reference-forward.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { toMergedDecoder } from './helpers/exporter-style.ts';
import { argmax, fullLogits, maxAbsDiff, session } from './onnx-helpers.ts';

const c = PRESETS.tiny;
const weights = initDecoderWeights(c, 8);
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function greedy(prompt: number[], n: number): number[] {
  const ids = [...prompt];
  for (let i = 0; i < n; i++) ids.push(argmax(referenceForward(c, weights, ids, true)[0]));
  return ids.slice(prompt.length);
}

describe('merged decoders', () => {
  it('decoder_model_merged.onnx loads with its with-past branch inlined and decodes like the reference in both modes', { timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'esopt-merged-'));
    dirs.push(dir);
    const copy = weights.map((w) => ({ ...w, data: Float32Array.from(w.data) }));
    saveModelDir(dir, { config: c, graph: toMergedDecoder(buildDecoder(c, copy)), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
    renameSync(join(dir, 'model.onnx'), join(dir, 'decoder_model_merged.onnx'));
    // the fixture is a valid merged decoder: onnxruntime runs it, and its cache branch computes the decoder
    const prompt0 = [256, 10, 20, 30];
    const merged = await session(toMergedDecoder(buildDecoder(c, weights)));
    const [viaIf] = await fullLogits(merged, c, [prompt0], { use_cache_branch: new ort.Tensor('bool', [true], [1]) });
    const [plain] = await fullLogits(await session(buildDecoder(c, weights)), c, [prompt0]);
    expect(maxAbsDiff(viaIf[3], plain[3])).toBe(0);
    const prompt = [256, 10, 20, 30];
    const row = { promptIds: prompt, member: { kind: 'base' as const }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 4, stop: [], ignoreEos: true };
    for (const mode of ['full', 'lowrank'] as const) {
      const loaded = loadModelDir(dir);
      expect(loaded.graph.graph.input.some((i) => i.name === 'use_cache_branch')).toBe(false);
      expect(loaded.graph.graph.node.some((n) => n.opType === 'If')).toBe(false);
      expect(loaded.weights.map((w) => w.name)).toEqual(weights.map((w) => w.name));
      const engine = await createOnnxEngine(loaded, { model: { dir }, mode });
      const [r] = await engine.generate([row]);
      expect(r.tokenIds, mode).toEqual(greedy(prompt, 4));
      await engine.close();
    }
  });

  it('one it cannot inline is refused naming the file and the export to run', () => {
    const model = toMergedDecoder(buildDecoder(c, weights));
    const then = model.graph.node[0].attribute.find((a) => a.name === 'then_branch')!;
    then.g!.node = then.g!.node.filter((n) => !n.input.some((i) => i.startsWith('past_key_values.')));
    expect(() => inlineCacheBranch(model, '/m/decoder_model_merged.onnx')).toThrow(
      /\/m\/decoder_model_merged\.onnx: its then_branch \(use_cache_branch = true\) does not read past_key_values; this is a merged decoder that esopt cannot inline .*optimum-cli export onnx --model <model> --task text-generation-with-past/,
    );
  });
});
