import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { loadModelDir } from '../../trainer/engine/model/model-dir.ts';
import { decodeModel, encodeModel, DataType } from '../../trainer/engine/onnx/proto.ts';
import { buildPreset, savePreset } from '../../trainer/engine/model/open-model.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-model-dir-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const saved = join(root, 'tiny');
savePreset(saved, 'tiny', 4);

/** A copy of the saved directory with one change applied. */
function broken(name: string, change: (dir: string) => void): string {
  const dir = join(root, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir);
  for (const f of ['model.onnx', 'model.onnx_data', 'config.json', 'tokenizer.json', 'tokenizer_config.json']) {
    copyFileSync(join(saved, f), join(dir, f), 0);
  }
  change(dir);
  return dir;
}
function rewriteModel(dir: string, edit: (m: ReturnType<typeof decodeModel>) => void): void {
  const m = decodeModel(readFileSync(join(dir, 'model.onnx')));
  edit(m);
  writeFileSync(join(dir, 'model.onnx'), encodeModel(m));
}

describe('model directories', () => {
  it('round trip: a saved built model loads back with the same weights and generates the same tokens', async () => {
    const loaded = loadModelDir(saved);
    const built = buildPreset('tiny', 4);
    expect(loaded.weights.map((w) => w.name)).toEqual(built.weights.map((w) => w.name));
    loaded.weights.forEach((w, i) => expect(Buffer.from(w.data.buffer, w.data.byteOffset, w.data.byteLength).equals(Buffer.from(built.weights[i].data.buffer, built.weights[i].data.byteOffset, built.weights[i].data.byteLength))).toBe(true));
    expect(readFileSync(join(saved, 'model.onnx_data')).length).toBeGreaterThan(500_000); // weights really are external
    const row = { messages: [{ role: 'user' as const, content: 'abc' }], member: { kind: 'base' as const }, sampling: { temperature: 0.8, topP: 0.9, topK: 0, seed: 3 }, maxNewTokens: 10, stop: [] };
    const fromDir = await createEngine({ model: { dir: saved }, mode: 'lowrank' });
    const fromPreset = await createEngine({ model: { preset: 'tiny', seed: 4 }, mode: 'lowrank' });
    const [a] = await fromDir.generate([row]);
    const [b] = await fromPreset.generate([row]);
    expect(a.tokenIds).toEqual(b.tokenIds);
    await Promise.all([fromDir.close(), fromPreset.close()]);
  });

  it('names the missing file', () => {
    const dir = broken('no-tokenizer', (d) => rmSync(join(d, 'tokenizer.json')));
    expect(() => loadModelDir(dir)).toThrow(/missing tokenizer\.json/);
    const noData = broken('no-data', (d) => rmSync(join(d, 'model.onnx_data')));
    expect(() => loadModelDir(noData)).toThrow(/model\.onnx_data: missing external data file \(needed by initializer "[^"]+"\)/);
    expect(() => loadModelDir(join(root, 'nowhere'))).toThrow(/does not exist/);
  });

  it('names the bad config field and a corrupt model file', () => {
    const dir = broken('bad-config', (d) => writeFileSync(join(d, 'config.json'), JSON.stringify({ ...JSON.parse(readFileSync(join(d, 'config.json'), 'utf8')), num_hidden_layers: 'two' })));
    expect(() => loadModelDir(dir)).toThrow(/config\.json: num_hidden_layers: /);
    const corrupt = broken('corrupt', (d) => writeFileSync(join(d, 'model.onnx'), Buffer.from('not a protobuf at all, really')));
    expect(() => loadModelDir(corrupt)).toThrow(/model\.onnx: not a valid ONNX model/);
  });

  it('names the mismatched IO name', () => {
    const renamed = broken('renamed-io', (d) => rewriteModel(d, (m) => {
      m.graph.output = m.graph.output.map((o) => (o.name === 'present.1.value' ? { ...o, name: 'present_1_value' } : o));
    }));
    expect(() => loadModelDir(renamed)).toThrow(/graph has no output "present\.1\.value"/);
  });

  it('names an op onnxruntime cannot run', async () => {
    const foreign = broken('foreign-op', (d) => rewriteModel(d, (m) => {
      const n = m.graph.node.find((x) => x.opType === 'Softmax')!;
      n.domain = 'org.example';
    }));
    expect(() => loadModelDir(foreign)).toThrow(/uses op org\.example\.Softmax/);
    const unknown = broken('unknown-op', (d) => rewriteModel(d, (m) => {
      m.graph.node.find((x) => x.opType === 'Softmax')!.opType = 'SoftMaxx';
    }));
    await expect(createEngine({ model: { dir: unknown }, mode: 'full' })).rejects.toThrow(/model\.onnx: onnxruntime could not create a session .*SoftMaxx/s);
  });
});
