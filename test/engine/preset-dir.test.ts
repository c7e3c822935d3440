import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { checkDecoderGraph } from '../../trainer/engine/model/graph-check.ts';
import { loadModelDir } from '../../trainer/engine/model/model-dir.ts';
import { buildPreset } from '../../trainer/engine/model/open-model.ts';
import { cachedPresetDir } from '../../trainer/engine/model/preset-dir.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { decoderTensorSpecs } from '../../trainer/engine/model/weights.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-preset-cache-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('cached preset directories', () => {
  it('builds a preset once, bit for bit the in-memory build, and reuses the directory after', () => {
    const dir = cachedPresetDir('tiny', 5, root);
    expect(readdirSync(root)).toEqual(['tiny-seed5']); // no partial directory left beside it
    const built = buildPreset('tiny', 5);
    const loaded = loadModelDir(dir);
    expect(loaded.weights.map((w) => w.name)).toEqual(built.weights.map((w) => w.name));
    loaded.weights.forEach((w, i) => expect(Buffer.from(w.data.buffer, w.data.byteOffset, w.data.byteLength).equals(Buffer.from(built.weights[i].data.buffer, built.weights[i].data.byteOffset, built.weights[i].data.byteLength))).toBe(true));
    const written = statSync(join(dir, 'model.onnx_data')).mtimeMs;
    expect(cachedPresetDir('tiny', 5, root)).toBe(dir);
    expect(statSync(join(dir, 'model.onnx_data')).mtimeMs).toBe(written);
    expect(existsSync(join(root, 'tiny-seed6'))).toBe(false);
  });

  it('qwen3-0.6b-shape has Qwen3-0.6B\'s parameter count with one tied embedding, and its graph checks', () => {
    const c = PRESETS['qwen3-0.6b-shape'];
    const specs = decoderTensorSpecs(c);
    expect(specs.reduce((a, s) => a + s.dims.reduce((x, y) => x * y, 1), 0)).toBe(596_049_920);
    expect(specs.filter((s) => s.name === 'model.embed_tokens.weight' || s.name === 'lm_head.weight').map((s) => s.name)).toEqual(['model.embed_tokens.weight']);
    // the graph around empty tensors (as the streaming build makes it): GQA 16/8, head_dim 128, q/k norms
    const graph = buildDecoder(c, specs.map((s) => ({ name: s.name, dims: s.dims, data: new Float32Array(0) })));
    expect(() => checkDecoderGraph(graph, c, 'qwen3-0.6b-shape')).not.toThrow();
    expect(graph.graph.initializer.filter((t) => t.name.endsWith('self_attn.q_norm.weight'))).toHaveLength(28);
  });
});
