/**
 * `exportModel` in safetensors: θ_K under the Hugging Face parameter names and layouts. PyTorch's two
 * exports of the same tiny Llama (one constant-folded, its MatMul weights renamed `onnx::MatMul_…` and
 * stored [in, out], its head a transposed copy of the table; one with the named parameters read through
 * Transpose nodes) both export θ_0 as exactly the named parameters — names, shapes, bytes — the head tied
 * to the embedding. An updated θ_K, loaded by name into PyTorch's own unfolded graph, decodes like the
 * engine holding it. fp16 stays F16; a built preset's untied head is lm_head.weight; a tensor that cannot
 * be named is refused by name.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { GenerateRow } from '../../trainer/engine/engine.ts';
import { exportModel } from '../../trainer/training/export/export-model.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from '../../trainer/engine/model/byte-tokenizer.ts';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { saveModelDir } from '../../trainer/engine/model/model-dir.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { toHalf } from '../../trainer/engine/onnx/half.ts';
import { decodeModel, encodeModel } from '../../trainer/engine/onnx/proto.ts';
import { toHalfExport } from '../engine/helpers/exporter-style.ts';
import { madeRun } from './helpers/made-run.ts';
import { plainGreedy } from './helpers/plain-greedy.ts';
import { readSafetensors } from './helpers/read-safetensors.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-st-export-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const fixtures = join(import.meta.dirname, '..', 'fixtures');
const UNFOLDED = join(fixtures, 'torch-llama-tied-unfolded');
const PROMPTS = [[256, 72, 101, 108, 108, 111], [257, 117, 115, 101, 114, 10, 50, 43, 50, 61], [97]];
const rows = (prompts: number[][]): GenerateRow[] => prompts.map((p) => ({ promptIds: p, member: { kind: 'base' }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 8, stop: [], ignoreEos: true }));
/** torch's named parameters, as the unfolded export holds them (the head shares the embedding, so it is not among them). */
const parameters = decodeModel(readFileSync(join(UNFOLDED, 'model.onnx'))).graph.initializer;

async function exported(name: string, model: { dir: string } | { preset: 'tiny'; seed: number }, updates: number, mode: 'full' | 'lowrank' = 'lowrank') {
  const made = await madeRun({ root: join(root, name, 'store'), run: 'r', model, mode, updates });
  const out = join(root, name, 'export');
  const summary = await exportModel({ store: made.store, run: 'r', out, format: 'safetensors' });
  return { made, out, summary, file: readSafetensors(join(out, 'model.safetensors')) };
}

describe.each(['torch-llama-tied', 'torch-llama-tied-unfolded'])('safetensors export of %s', (fixture) => {
  it('θ_0 is torch’s named parameters: the same names, shapes and bytes; the head tied', async () => {
    const { made, out, summary, file } = await exported(`${fixture}-0`, { dir: join(fixtures, fixture) }, 0);
    await made.engine.close();
    expect(summary).toMatchObject({ iteration: 0, format: 'safetensors', thetaHash: made.hashes[0] });
    expect(file.metadata).toEqual({ format: 'pt' });
    expect(file.keys).toEqual([...file.keys].sort());
    expect(file.keys).toEqual(parameters.map((t) => t.name).sort());
    for (const t of parameters) {
      const got = file.tensors.get(t.name)!;
      expect({ name: t.name, dtype: got.dtype, shape: got.shape }).toEqual({ name: t.name, dtype: 'F32', shape: t.dims });
      expect(got.bytes.equals(Buffer.from(t.rawData!))).toBe(true);
    }
    expect(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).tie_word_embeddings).toBe(true);
    expect(summary.files.map((f) => f.path)).toEqual(['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']);
    expect(summary.skipped).toEqual([
      { file: 'greedy.json', why: 'not a file a model is loaded with (config, tokenizer, chat template, licence)' },
      { file: 'model.onnx', why: 'a graph or weight file: the export writes θ_K itself' },
    ]);
  });
});

it('an updated θ_K loaded by name into torch’s own unfolded graph decodes like the engine holding θ_K', { timeout: 60_000 }, async () => {
  const { made, file } = await exported('updated', { dir: join(fixtures, 'torch-llama-tied') }, 2);
  try {
    const engineTokens = (await made.engine.generate(rows(PROMPTS))).map((r) => r.tokenIds);
    const graph = decodeModel(readFileSync(join(UNFOLDED, 'model.onnx')));
    for (const t of graph.graph.initializer) {
      const before = Buffer.from(t.rawData!);
      t.rawData = new Uint8Array(file.tensors.get(t.name)!.bytes);
      // low-rank mode updates the matrices, not the norm scales
      expect(before.equals(Buffer.from(t.rawData))).toBe(t.dims.length === 1);
    }
    const path = join(root, 'updated', 'unfolded-with-export.onnx');
    writeFileSync(path, encodeModel(graph));
    const config = JSON.parse(readFileSync(join(UNFOLDED, 'config.json'), 'utf8')) as ModelConfig;
    const torch = JSON.parse(readFileSync(join(UNFOLDED, 'greedy.json'), 'utf8')) as { runs: Array<{ greedy: number[] }> };
    expect(engineTokens).not.toEqual(torch.runs.map((r) => r.greedy));
    expect(await plainGreedy(path, config, PROMPTS, 8)).toEqual(engineTokens);
  } finally {
    await made.engine.close();
  }
});

it('an fp16 model exports F16 tensors in nn.Linear’s [out, in], θ_K rounded to nearest even', async () => {
  const c: ModelConfig = { model_type: 'llama', vocab_size: 260, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64, tie_word_embeddings: true, eos_token_id: 257 };
  const dir = join(root, 'fp16-model');
  saveModelDir(dir, { config: c, graph: toHalfExport(buildDecoder(c, initDecoderWeights(c, 4)), 'fp16'), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
  const { made, file } = await exported('fp16', { dir }, 1, 'full');
  try {
    expect(new Set([...file.tensors.values()].map((t) => t.dtype))).toEqual(new Set(['F16']));
    expect(file.keys).not.toContain('lm_head.weight');
    const q = made.engine.segments().find((s) => s.name === 'model.layers.0.self_attn.q_proj.weight')!;
    // θ holds the MatMul weight [in 32, out 32]; the file holds [out, in]
    const out = new Float32Array(32 * 32);
    for (let i = 0; i < 32; i++) for (let o = 0; o < 32; o++) out[o * 32 + i] = q.data[i * 32 + o];
    const half = new Uint16Array(out.length);
    toHalf(out, half, 'fp16');
    expect(file.tensors.get('model.layers.0.self_attn.q_proj.weight')!.bytes.equals(Buffer.from(half.buffer))).toBe(true);
    expect(file.tensors.get('model.layers.0.mlp.up_proj.weight')!.shape).toEqual([64, 32]);
  } finally {
    await made.engine.close();
  }
});

it('a built preset exports its untied head as lm_head.weight [vocab, hidden], with its config and tokenizer', async () => {
  const { made, out, file } = await exported('preset', { preset: 'tiny', seed: 2 }, 1, 'full');
  await made.engine.close();
  expect(file.tensors.get('lm_head.weight')!.shape).toEqual([260, 64]);
  expect(file.tensors.get('model.embed_tokens.weight')!.shape).toEqual([260, 64]);
  expect(file.tensors.get('model.layers.0.mlp.down_proj.weight')!.shape).toEqual([64, 192]);
  expect(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'))).toMatchObject({ hidden_size: 64, tie_word_embeddings: false });
});

it('a tensor it cannot name is refused by name, and nothing is left behind', async () => {
  const dir = join(root, 'unnamed');
  mkdirSync(dir);
  for (const f of ['config.json', 'tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(fixtures, 'torch-llama-tied', f), join(dir, f));
  const graph = decodeModel(readFileSync(join(fixtures, 'torch-llama-tied', 'model.onnx')));
  // a MatMul outside any module scope: its folded weight has no parameter name to take
  graph.graph.node.find((n) => n.name === '/layers.0/self_attn/q_proj/MatMul')!.name = 'q_proj_matmul';
  writeFileSync(join(dir, 'model.onnx'), encodeModel(graph));
  const made = await madeRun({ root: join(root, 'unnamed-store'), run: 'r', model: { dir }, mode: 'full', updates: 0 });
  await made.engine.close();
  const out = join(root, 'unnamed-export');
  await expect(exportModel({ store: made.store, run: 'r', out, format: 'safetensors' })).rejects.toThrow(
    /cannot map a tensor to the model's Hugging Face parameters, so no safetensors export \(esopt refuses rather than guess\): "onnx::MatMul_540" \(read by MatMul "q_proj_matmul": not the weight of one named MatMul\)/,
  );
  expect(() => readFileSync(join(out, 'model.safetensors'))).toThrow();
  // the ONNX export does not need the names
  await expect(exportModel({ store: made.store, run: 'r', out, format: 'onnx' })).resolves.toMatchObject({ iteration: 0 });
});
