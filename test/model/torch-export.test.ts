/**
 * An export written by PyTorch's own ONNX exporter (scripts/export-torch-llama.py: a tiny Llama whose LM
 * head shares the embedding Parameter) loads with the tie as one θ entry and decodes greedily token for
 * token like torch with its KV cache (greedy.json), in full and low-rank mode; after an ES update both
 * uses of the table still read the same values.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../trainer/model/config.ts';
import { createOnnxEngine } from '../../trainer/model/create-engine.ts';
import { loadModelDir } from '../../trainer/model/model-dir.ts';
import { parameterCount } from '../../trainer/model/weights.ts';
import { decodeModel, type ModelProto } from '../../trainer/onnx/proto.ts';
import type { PerturbationMode } from '../../trainer/engine.ts';
import { argmax, fullLogits, session } from './onnx-helpers.ts';

const dir = join(import.meta.dirname, '..', 'fixtures', 'torch-llama-tied');
const torch = JSON.parse(readFileSync(join(dir, 'greedy.json'), 'utf8')) as { parameters: number; new_tokens: number; runs: Array<{ prompt: number[]; greedy: number[] }> };
const EMBED = 'model.embed_tokens.weight';
const rows = () => torch.runs.map((r) => ({ promptIds: r.prompt, member: { kind: 'base' as const }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: torch.new_tokens, stop: [], ignoreEos: true }));

/** Greedy decoding by recomputing the exporter's own graph (no cache) from scratch each step. */
async function greedyOn(model: ModelProto, c: ModelConfig, prompt: number[], n: number): Promise<number[]> {
  const s = await session(model);
  const ids = [...prompt];
  for (let i = 0; i < n; i++) {
    const [logits] = await fullLogits(s, c, [ids]);
    ids.push(argmax(logits[ids.length - 1]));
  }
  return ids.slice(prompt.length);
}

describe('an export by torch.onnx.export (tied embeddings)', () => {
  it('loads the tie as one θ entry: θ count = torch parameter count', () => {
    const loaded = loadModelDir(dir);
    expect(parameterCount(loaded.weights)).toBe(torch.parameters);
    expect(loaded.weights.filter((w) => w.dims.includes(loaded.config.vocab_size)).map((w) => w.name)).toEqual([EMBED]);
  });

  it.each(['full', 'lowrank'] as PerturbationMode[])('%s mode: greedy decoding equals torch token for token', { timeout: 60_000 }, async (mode) => {
    const loaded = loadModelDir(dir);
    const engine = await createOnnxEngine(loaded, { model: { dir }, mode });
    try {
      const out = await engine.generate(rows());
      expect(out.map((r) => r.tokenIds)).toEqual(torch.runs.map((r) => r.greedy));
    } finally {
      await engine.close();
    }
  });

  it.each(['full', 'lowrank'] as PerturbationMode[])('%s mode: after an update both uses of the table read the updated values', { timeout: 60_000 }, async (mode) => {
    const loaded = loadModelDir(dir);
    const before = Float32Array.from(loaded.weights.find((w) => w.name === EMBED)!.data);
    const engine = await createOnnxEngine(loaded, { model: { dir }, mode });
    try {
      await engine.applyUpdate({ runSeed: 3, iteration: 1, rank: 2, coefficients: [{ noiseIndex: 0, coef: 40 }, { noiseIndex: 1, coef: -25 }] });
      const updated = await engine.withRestoredWeights((segs) => new Map(segs.map((s) => [s.name, Float32Array.from(s.data)])));
      const table = updated.get(EMBED)!;
      expect(table.some((v, i) => Math.abs(v - before[i]) > 1e-3)).toBe(true);
      // the exporter's own graph, every weight set to the updated θ and its head's copy of the table to the
      // updated table (transposed, as the exporter folded it): what a tie-preserving update must decode like
      const raw = decodeModel(readFileSync(join(dir, 'model.onnx')));
      const [V, H] = [loaded.config.vocab_size, loaded.config.hidden_size];
      for (const t of raw.graph.initializer) {
        const w = updated.get(t.name);
        if (t.dims.length === 2 && t.dims[0] === H && t.dims[1] === V) t.rawData = new Uint8Array(Float32Array.from({ length: H * V }, (_, k) => table[(k % V) * H + Math.floor(k / V)]).buffer);
        else if (w) t.rawData = new Uint8Array(Float32Array.from(w).buffer);
      }
      const expected = await Promise.all(torch.runs.map((r) => greedyOn(raw, loaded.config, r.prompt, torch.new_tokens)));
      expect(expected).not.toEqual(torch.runs.map((r) => r.greedy));
      const out = await engine.generate(rows());
      expect(out.map((r) => r.tokenIds)).toEqual(expected);
    } finally {
      await engine.close();
    }
  });
});
