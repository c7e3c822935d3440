/**
 * `exportModel` in ONNX: θ_K written into the original graph file, unmodified but for θ's initializers, in
 * the file's own form. The export loads with plain onnxruntime-node (an InferenceSession on the file) and
 * with loadModelDir (θ hash = θ_K), and decodes greedily token for token like the engine holding θ_K: for
 * PyTorch's tied exports (the head a folded transposed copy, or a Transpose node) in full and low-rank
 * mode, a built preset, an fp16 export with external data and a duplicated head, which stays fp16, a
 * merged decoder (written back merged), and a bf16 export, which stays bf16.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { hashTheta } from '../../shared/theta-hash.ts';
import type { GenerateRow, PerturbationMode } from '../../trainer/engine/engine.ts';
import { exportModel } from '../../trainer/training/export/export-model.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from '../../trainer/engine/model/byte-tokenizer.ts';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { loadModelDir, saveModelDir } from '../../trainer/engine/model/model-dir.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { bf16Bits, bf16Value, toHalf } from '../../trainer/engine/onnx/half.ts';
import { DataType, decodeModel, type ModelProto } from '../../trainer/engine/onnx/proto.ts';
import { foldTiedHead, toHalfExport, toMergedDecoder } from '../engine/helpers/exporter-style.ts';
import { madeRun } from './helpers/made-run.ts';
import { plainGreedy } from './helpers/plain-greedy.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-onnx-export-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const fixtures = join(import.meta.dirname, '..', 'fixtures');
const PROMPTS = [[256, 72, 101, 108, 108, 111], [257, 117, 115, 101, 114, 10, 50, 43, 50, 61], [97]];
const NEW_TOKENS = 8;
const rows = (prompts: number[][]): GenerateRow[] => prompts.map((p) => ({ promptIds: p, member: { kind: 'base' }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: NEW_TOKENS, stop: [], ignoreEos: true }));
const graphOf = (file: string) => decodeModel(readFileSync(file), file);
/** The graph with its initializers' data left out: what an export must keep as the original had it. */
const structure = (m: ModelProto) => ({ ...m, graph: { ...m.graph, initializer: m.graph.initializer.map((t) => ({ name: t.name, dims: t.dims, dataType: t.dataType, external: t.dataLocation === 1 })) } });

async function exportAndCheck(o: { name: string; model: { dir: string } | { preset: 'tiny'; seed: number }; mode: PerturbationMode; original?: string }) {
  const made = await madeRun({ root: join(root, o.name, 'store'), run: 'r', model: o.model, mode: o.mode, updates: 2, checkpoints: [1] });
  try {
    const out = join(root, o.name, 'export');
    const summary = await exportModel({ store: made.store, run: 'r', out, format: 'onnx' });
    expect(summary).toMatchObject({ iteration: 2, thetaHash: made.hashes[2], checkpoint: 1, replayed: 1, format: 'onnx', mode: o.mode });
    const engineTokens = (await made.engine.generate(rows(PROMPTS))).map((r) => r.tokenIds);
    const loaded = loadModelDir(out);
    // the export is θ_K exactly (fp32) and an ordinary ONNX file: plain onnxruntime decodes it like the engine
    expect(hashTheta(loaded.weights)).toBe(made.hashes[2]);
    expect(await plainGreedy(join(out, 'model.onnx'), loaded.config, PROMPTS, NEW_TOKENS)).toEqual(engineTokens);
    if (o.original) expect(structure(graphOf(join(out, 'model.onnx')))).toEqual(structure(graphOf(o.original)));
    for (const f of summary.files) expect(existsSync(join(out, f.path))).toBe(true);
    expect(summary.files.map((f) => f.path).sort()).toEqual(readdirSync(out).sort());
    return { out, summary, engineTokens, made };
  } finally {
    await made.engine.close();
  }
}

describe.each(['torch-llama-tied', 'torch-llama-tied-unfolded'])('ONNX export of PyTorch’s tied export %s', (fixture) => {
  const dir = join(fixtures, fixture);
  const torch = JSON.parse(readFileSync(join(dir, 'greedy.json'), 'utf8')) as { runs: Array<{ greedy: number[] }> };

  it.each(['full', 'lowrank'] as PerturbationMode[])('%s mode: θ_K written into the original graph decodes like the engine holding θ_K', { timeout: 60_000 }, async (mode) => {
    const { out, engineTokens, summary } = await exportAndCheck({ name: `${fixture}-${mode}`, model: { dir }, mode, original: join(dir, 'model.onnx') });
    // the updates moved the greedy output off θ_0's (torch's own), so a misplaced tensor would show
    expect(engineTokens).not.toEqual(torch.runs.map((r) => r.greedy));
    expect(summary.files.map((f) => f.path)).toEqual(['config.json', 'model.onnx', 'tokenizer.json', 'tokenizer_config.json']);
    expect(readFileSync(join(out, 'tokenizer.json'))).toEqual(readFileSync(join(dir, 'tokenizer.json')));
    // esopt loads it and serves it like the engine that trained it
    const engine = await createEngine({ model: { dir: out }, mode });
    try {
      expect((await engine.generate(rows(PROMPTS))).map((r) => r.tokenIds)).toEqual(engineTokens);
    } finally {
      await engine.close();
    }
  });
});

describe('ONNX export of other layouts', () => {
  it('a built preset exports as built presets are saved, and serves like the engine', { timeout: 60_000 }, async () => {
    const { out, summary } = await exportAndCheck({ name: 'preset', model: { preset: 'tiny', seed: 5 }, mode: 'full' });
    expect(summary.files.map((f) => f.path)).toEqual(['config.json', 'model.onnx', 'model.onnx_data', 'tokenizer.json', 'tokenizer_config.json']);
    expect(summary.model).toEqual({ preset: 'tiny', seed: 5 });
    expect(loadModelDir(out).config.hidden_size).toBe(64);
  });

  it('an fp16 export (external data, the head a duplicate of the table) stays fp16, its bytes θ_K rounded to nearest even', { timeout: 60_000 }, async () => {
    const c: ModelConfig = {
      model_type: 'llama', vocab_size: 260, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4,
      num_key_value_heads: 2, max_position_embeddings: 64, rms_norm_eps: 1e-6, tie_word_embeddings: true, eos_token_id: 257, torch_dtype: 'float16',
    };
    const weights = initDecoderWeights(c, 11).map((w) => ({ ...w, data: w.dims.length === 2 ? w.data.map((v) => v * 4) : w.data }));
    const dir = join(root, 'fp16-model');
    saveModelDir(dir, { config: c, graph: toHalfExport(foldTiedHead(buildDecoder(c, weights), 'duplicate'), 'fp16'), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
    const original = graphOf(join(dir, 'model.onnx'));
    expect(original.graph.initializer.find((t) => t.name === 'lm_head.weight')?.dataLocation).toBe(1);
    const { out, made } = await exportAndCheckHalf(dir, original);
    // the head's copy is the updated table, bit for bit as the table is written
    const exported = loadModelDir(out);
    expect(exported.rewrites?.tiedCopy).toEqual({ name: 'lm_head.weight', embedding: 'model.embed_tokens.weight', layout: 'copy' });
    const raw = graphOf(join(out, 'model.onnx'));
    const data = readFileSync(join(out, 'model.onnx_data'));
    const bytesOf = (name: string) => {
      const t = raw.graph.initializer.find((x) => x.name === name)!;
      const at = (k: string) => Number(t.externalData!.find((e) => e.key === k)!.value);
      return data.subarray(at('offset'), at('offset') + at('length'));
    };
    const table = made.thetaK.find((w) => w.name === 'model.embed_tokens.weight')!;
    const half = new Uint16Array(table.data.length);
    toHalf(table.data, half, 'fp16');
    expect(bytesOf('model.embed_tokens.weight')).toEqual(Buffer.from(half.buffer));
    expect(bytesOf('lm_head.weight')).toEqual(Buffer.from(half.buffer));
  });
});

describe('ONNX export of a merged decoder and of bf16', () => {
  it('a merged decoder is written back merged (the If and both branches kept) and decodes like the engine', { timeout: 60_000 }, async () => {
    const dir = join(root, 'merged-model');
    saveModelDir(dir, { config: PRESETS.tiny, graph: toMergedDecoder(buildDecoder(PRESETS.tiny, initDecoderWeights(PRESETS.tiny, 6))), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
    renameSync(join(dir, 'model.onnx'), join(dir, 'decoder_model_merged.onnx'));
    const made = await madeRun({ root: join(root, 'merged', 'store'), run: 'r', model: { dir }, mode: 'full', updates: 1 });
    try {
      const out = join(root, 'merged', 'export');
      const summary = await exportModel({ store: made.store, run: 'r', out });
      expect(summary.files.map((f) => f.path)).toEqual(['config.json', 'decoder_model_merged.onnx', 'model.onnx_data', 'tokenizer.json', 'tokenizer_config.json']);
      const file = join(out, 'decoder_model_merged.onnx');
      expect(structure(graphOf(file))).toEqual(structure(graphOf(join(dir, 'decoder_model_merged.onnx'))));
      expect(hashTheta(loadModelDir(out).weights)).toBe(made.hashes[1]);
      const engineTokens = (await made.engine.generate(rows(PROMPTS))).map((r) => r.tokenIds);
      expect(await plainGreedy(file, PRESETS.tiny, PROMPTS, NEW_TOKENS, { use_cache_branch: new ort.Tensor('bool', [true], [1]) })).toEqual(engineTokens);
    } finally {
      await made.engine.close();
    }
  });

  it('a bf16 export stays bf16: its weights are θ_K rounded to bf16, and it loads back to those values', async () => {
    const c = { ...PRESETS.tiny, torch_dtype: 'bfloat16' };
    const dir = join(root, 'bf16-model');
    saveModelDir(dir, { config: c, graph: toHalfExport(buildDecoder(c, initDecoderWeights(c, 9)), 'bf16'), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
    const made = await madeRun({ root: join(root, 'bf16', 'store'), run: 'r', model: { dir }, mode: 'full', updates: 1 });
    try {
      const out = join(root, 'bf16', 'export');
      await exportModel({ store: made.store, run: 'r', out });
      expect(new Set(graphOf(join(out, 'model.onnx')).graph.initializer.filter((t) => t.name.endsWith('.weight')).map((t) => t.dataType))).toEqual(new Set([DataType.BFLOAT16]));
      const rounded = made.engine.segments().map((s) => ({ data: s.data.map((v) => bf16Value(bf16Bits(v))) }));
      expect(made.engine.segments().some((s) => s.data.some((v, i) => v !== rounded[made.engine.segments().indexOf(s)].data[i]))).toBe(true);
      expect(hashTheta(loadModelDir(out).weights)).toBe(hashTheta(rounded));
    } finally {
      await made.engine.close();
    }
  });
});

/** The fp16 case of exportAndCheck: θ_K is rounded on the way out, so the check is the decode and the dtypes. */
async function exportAndCheckHalf(dir: string, original: ModelProto) {
  const made = await madeRun({ root: join(root, 'fp16', 'store'), run: 'r', model: { dir }, mode: 'lowrank', updates: 2, alpha: 0.2 });
  try {
    const out = join(root, 'fp16', 'export');
    const summary = await exportModel({ store: made.store, run: 'r', out });
    expect(summary).toMatchObject({ iteration: 2, thetaHash: made.hashes[2], checkpoint: null, replayed: 2 });
    const exported = graphOf(join(out, 'model.onnx'));
    expect(structure(exported)).toEqual(structure(original));
    expect(exported.graph.initializer.filter((t) => t.dataType === DataType.FLOAT16).length).toBeGreaterThan(10);
    const engineTokens = (await made.engine.generate(rows(PROMPTS))).map((r) => r.tokenIds);
    const loaded = loadModelDir(out);
    expect(await plainGreedy(join(out, 'model.onnx'), loaded.config, PROMPTS, NEW_TOKENS)).toEqual(engineTokens);
    const thetaK = await made.engine.withRestoredWeights((segs) => segs.map((s) => ({ name: s.name, data: Float32Array.from(s.data) })));
    return { out, made: { ...made, thetaK } };
  } finally {
    await made.engine.close();
  }
}
