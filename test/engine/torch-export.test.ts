/**
 * An export written by PyTorch's own ONNX exporter (scripts/export-torch-llama.py: a tiny Llama whose LM
 * head shares the embedding Parameter) loads with the tie as one θ entry and decodes greedily token for
 * token like torch with its KV cache (greedy.json), in full and low-rank mode; after an ES update both
 * uses of the table still read the same values.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { loadModelDir } from '../../trainer/engine/model/model-dir.ts';
import { parameterCount } from '../../trainer/engine/model/weights.ts';
import { decodeModel, type ModelProto } from '../../trainer/engine/onnx/proto.ts';
import type { PerturbationMode } from '../../trainer/engine/engine.ts';
import { lowRankRewrite } from '../../trainer/engine/perturbation/lowrank-graph.ts';
import { argmax, fullLogits, session } from './onnx-helpers.ts';

const EMBED = 'model.embed_tokens.weight';
type Torch = { parameters: number; new_tokens: number; runs: Array<{ prompt: number[]; greedy: number[] }> };
const rows = (torch: Torch) => torch.runs.map((r) => ({ promptIds: r.prompt, member: { kind: 'base' as const }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: torch.new_tokens, stop: [], ignoreEos: true }));

/** w [rows, cols] → [cols, rows]. */
function transpose(w: Float32Array, rows: number, cols: number): Float32Array {
  return Float32Array.from({ length: rows * cols }, (_, k) => w[(k % rows) * cols + Math.floor(k / rows)]);
}
const bytes = (w: Float32Array) => new Uint8Array(Float32Array.from(w).buffer);

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

// do_constant_folding=True writes the head as a transposed copy of the table and nn.Linear weights as
// transposed `onnx::MatMul_…` initializers; False writes Transpose nodes over the parameters themselves
describe.each(['torch-llama-tied', 'torch-llama-tied-unfolded'])('an export by torch.onnx.export (tied embeddings): %s', (fixture) => {
  const dir = join(import.meta.dirname, '..', 'fixtures', fixture);
  const torch = JSON.parse(readFileSync(join(dir, 'greedy.json'), 'utf8')) as Torch;

  it('loads the tie as one θ entry (θ count = torch parameter count); every matrix is a low-rank target', () => {
    const loaded = loadModelDir(dir);
    expect(parameterCount(loaded.weights)).toBe(torch.parameters);
    expect(loaded.weights.filter((w) => w.dims.includes(loaded.config.vocab_size)).map((w) => w.name)).toEqual([EMBED]);
    const matrices = loaded.weights.filter((w) => w.dims.length === 2).map((w) => w.name);
    expect(matrices.length).toBe(1 + 7 * loaded.config.num_hidden_layers);
    expect(lowRankRewrite(loaded.graph, loaded.weights).targets.map((t) => t.name).sort()).toEqual(matrices.sort());
  });

  it.each(['full', 'lowrank'] as PerturbationMode[])('%s mode: greedy decoding equals torch token for token', { timeout: 60_000 }, async (mode) => {
    const loaded = loadModelDir(dir);
    const engine = await createOnnxEngine(loaded, { model: { dir }, mode });
    try {
      const out = await engine.generate(rows(torch));
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
      // (a weight the loader stored transposed, read through a Transpose node there, is written back as stored)
      const raw = decodeModel(readFileSync(join(dir, 'model.onnx')));
      const [V, H] = [loaded.config.vocab_size, loaded.config.hidden_size];
      const readByTranspose = new Set(raw.graph.node.filter((n) => n.opType === 'Transpose').map((n) => n.input[0]));
      for (const t of raw.graph.initializer) {
        const w = updated.get(t.name);
        if (t.dims.length === 2 && t.dims[0] === H && t.dims[1] === V) t.rawData = bytes(transpose(table, V, H));
        else if (w) t.rawData = bytes(t.name !== EMBED && readByTranspose.has(t.name) ? transpose(w, t.dims[1], t.dims[0]) : w);
      }
      const expected = await Promise.all(torch.runs.map((r) => greedyOn(raw, loaded.config, r.prompt, torch.new_tokens)));
      expect(expected).not.toEqual(torch.runs.map((r) => r.greedy));
      const out = await engine.generate(rows(torch));
      expect(out.map((r) => r.tokenIds)).toEqual(expected);
    } finally {
      await engine.close();
    }
  });
});
