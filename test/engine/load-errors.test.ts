/**
 * Every layout the loader refuses fails with an error that names the file, the tensor or the op, and says
 * what is supported (a table of planted bad models); a sliding window shorter than the context caps it.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { loadModelDir } from '../../trainer/engine/model/model-dir.ts';
import { savePreset } from '../../trainer/engine/model/open-model.ts';
import { DataType, decodeModel, encodeModel, type ModelProto } from '../../trainer/engine/onnx/proto.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-load-errors-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const saved = join(root, 'tiny');
savePreset(saved, 'tiny', 2);

function planted(name: string, change: (dir: string) => void): string {
  const dir = join(root, name);
  mkdirSync(dir);
  for (const f of ['model.onnx', 'model.onnx_data', 'config.json', 'tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(saved, f), join(dir, f));
  change(dir);
  return dir;
}
const graph = (edit: (m: ModelProto) => void) => (dir: string) => {
  const m = decodeModel(readFileSync(join(dir, 'model.onnx')));
  edit(m);
  writeFileSync(join(dir, 'model.onnx'), encodeModel(m));
};
const config = (edit: (c: Record<string, unknown>) => void) => (dir: string) => {
  const c = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  edit(c);
  writeFileSync(join(dir, 'config.json'), JSON.stringify(c));
};
const useCacheBranch = graph((m) => m.graph.input.push({ name: 'use_cache_branch', type: { tensorType: { elemType: DataType.BOOL, shape: { dim: [{ dimValue: 1 }] } } } }));

interface Case {
  name: string;
  change: (dir: string) => void;
  /** Where the error comes: loading the directory, or making the engine's session. */
  at: 'load' | 'session';
  error: RegExp;
}

const CASES: Case[] = [
  { name: 'unknown op', at: 'session', change: graph((m) => void (m.graph.node.find((n) => n.opType === 'Softmax')!.opType = 'SoftMaxx')), error: /unknown-op\/model\.onnx: onnxruntime could not create a session .*SoftMaxx.*esopt runs the ops onnxruntime-node \S+ implements for the cpu provider/s },
  { name: 'op domain', at: 'load', change: graph((m) => void (m.graph.node.find((n) => n.opType === 'Softmax')!.domain = 'org.example')), error: /op-domain\/model\.onnx: node "Softmax_\d+" uses op org\.example\.Softmax, .*supported: the default ONNX domain and com\.microsoft/ },
  // bf16 exports load widened to fp32 (bf16-widening.ts); a dtype attribute it does not know is refused
  {
    name: 'bf16 dtype attribute', at: 'load',
    change: graph((m) => void m.graph.node.find((n) => n.opType === 'Softmax')!.attribute.push({ name: 'dtype', type: 2, i: DataType.BFLOAT16 })),
    error: /bf16-dtype-attribute\/model\.onnx: node "Softmax_\d+" \(Softmax\) sets dtype = BFLOAT16, which esopt cannot widen to float32 \(it widens Cast\.to, .*export the model in float16 or float32/,
  },
  { name: 'bf16 size', at: 'load', change: graph((m) => void (m.graph.initializer.find((t) => t.name === 'model.norm.weight')!.dataType = DataType.BFLOAT16)), error: /bf16-size\/model\.onnx_data: initializer "model\.norm\.weight" has 256 bytes of external data, expected 128 for dims \[64\]/ },
  { name: 'uint16', at: 'load', change: graph((m) => void (m.graph.initializer.find((t) => t.name === 'model.norm.weight')!.dataType = 4)), error: /uint16\/model\.onnx: initializer "model\.norm\.weight" has unsupported dtype UINT16 \(esopt reads FLOAT, .*FLOAT16/ },
  { name: 'io dtype', at: 'load', change: graph((m) => void (m.graph.input.find((i) => i.name === 'input_ids')!.type!.tensorType!.elemType = DataType.INT32)), error: /io-dtype\/model\.onnx: input "input_ids" is INT32, expected INT64/ },
  { name: 'missing config key', at: 'load', change: config((c) => delete c.num_hidden_layers), error: /missing-config-key\/config\.json: num_hidden_layers: / },
  { name: 'external data missing', at: 'load', change: (d) => rmSync(join(d, 'model.onnx_data')), error: /external-data-missing\/model\.onnx_data: missing external data file \(needed by initializer "[^"]+"\)/ },
  { name: 'merged decoder input', at: 'load', change: useCacheBranch, error: /merged-decoder-input\/model\.onnx: 0 If nodes read "use_cache_branch" \(esopt inlines exactly one\); this is a merged decoder that esopt cannot inline .*optimum-cli export onnx --model <model> --task text-generation-with-past/ },
  {
    name: 'merged decoder file', at: 'load',
    change: (d) => { useCacheBranch(d); renameSync(join(d, 'model.onnx'), join(d, 'decoder_model_merged.onnx')); },
    error: /merged-decoder-file\/decoder_model_merged\.onnx: 0 If nodes .*use decoder_with_past_model\.onnx/,
  },
  { name: 'no model file', at: 'load', change: (d) => rmSync(join(d, 'model.onnx')), error: /no-model-file is missing model\.onnx \(or decoder_model_merged\.onnx \/ decoder_with_past_model\.onnx; export with `optimum-cli export onnx/ },
  {
    name: 'tie mismatch', at: 'load',
    change: config((c) => (c.tie_word_embeddings = true)),
    error: /tie-mismatch\/config\.json: tie_word_embeddings is true, but the LM head in .*model\.onnx reads "lm_head\.weight", which is not the embedding "model\.embed_tokens\.weight"/,
  },
];

describe('planted bad models', () => {
  it.each(CASES)('$name: $error', async ({ name, change, at, error }) => {
    const dir = planted(name.replaceAll(' ', '-'), change);
    if (at === 'load') expect(() => loadModelDir(dir)).toThrow(error);
    else await expect(createEngine({ model: { dir }, mode: 'full' })).rejects.toThrow(error);
  });
});

describe('sliding window', () => {
  it('a window shorter than max_position_embeddings caps the served context, citing it', { timeout: 30_000 }, async () => {
    const dir = planted('sliding-window', config((c) => Object.assign(c, { model_type: 'mistral', sliding_window: 16 })));
    const engine = await createEngine({ model: { dir }, mode: 'lowrank' });
    try {
      expect(engine.contextLength).toBe(16);
      const row = { promptIds: Array.from({ length: 12 }, (_, i) => 40 + i), member: { kind: 'base' as const }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, stop: [] };
      await expect(engine.generate([{ ...row, maxNewTokens: 4 }])).resolves.toHaveLength(1);
      await expect(engine.generate([{ ...row, maxNewTokens: 5 }])).rejects.toThrow(/exceeds the context length 16 \(config\.json's sliding_window \(max_position_embeddings is 512/);
    } finally {
      await engine.close();
    }
    // Qwen2 carries a sliding_window it does not use
    const off = planted('sliding-window-off', config((c) => Object.assign(c, { model_type: 'qwen2', sliding_window: 16, use_sliding_window: false })));
    const qwen = await createEngine({ model: { dir: off }, mode: 'lowrank' });
    expect(qwen.contextLength).toBe(512);
    await qwen.close();
  });
});
