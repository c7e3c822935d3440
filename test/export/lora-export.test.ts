/**
 * `exportModel` of a LoRA run: the model directory holds the merged weights (a normal export) and
 * peft-adapter/ holds θ_K's adapters in PEFT's layout. Read back: the adapter's tensor names and shapes are
 * PEFT's for exactly the adapted modules, its bytes are θ_K's A and B; the merged safetensors are
 * base + (α/r)·B·A on the adapted modules and the base bytes elsewhere; the merged ONNX export, loaded by
 * plain onnxruntime, decodes like the LoRA engine's base row at θ_K. The portable run artifact refuses it.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { exportModel } from '../../trainer/training/export/export-model.ts';
import { buildRunArtifact } from '../../trainer/training/export/run-artifact.ts';
import { PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE } from '../../trainer/training/export/peft-adapter.ts';
import { SAFETENSORS_FILE } from '../../trainer/training/export/safetensors-export.ts';
import { loraMatrices } from '../../trainer/engine/model/lora-matrices.ts';
import { openModel } from '../../trainer/engine/model/open-model.ts';
import { madeRun } from './helpers/made-run.ts';
import { plainGreedy } from './helpers/plain-greedy.ts';
import { readSafetensors } from './helpers/read-safetensors.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-lora-export-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const floats = (b: Buffer) => new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));

describe('exporting a lora run', () => {
  it('writes the merged model and, beside it, the adapters as PEFT loads them', async () => {
    const spec = { preset: 'tiny' as const, seed: 1 };
    const lora = { rank: 4, alpha: 8, targets: { include: ['q_proj,v_proj,down_proj'] } };
    const made = await madeRun({ root: join(root, 'store'), run: 'r', model: spec, mode: 'lora', lora, updates: 2, checkpoints: [1] });
    try {
      const base = openModel(spec);
      const { layout } = loraMatrices(base, made.config.lora!);
      const modules = layout.slots.map((s) => s.name.replace(/\.weight$/, ''));
      expect(modules).toEqual([0, 1].flatMap((l) => [`model.layers.${l}.self_attn.q_proj`, `model.layers.${l}.self_attn.v_proj`, `model.layers.${l}.mlp.down_proj`]));

      const out = join(root, 'st');
      const summary = await exportModel({ store: made.store, run: 'r', out, format: 'safetensors' });
      expect(summary).toMatchObject({ iteration: 2, mode: 'lora', thetaHash: made.hashes[2], checkpoint: 1, replayed: 1, adapter: 'peft-adapter' });
      expect(summary.files.map((f) => f.path)).toEqual(expect.arrayContaining([join('peft-adapter', PEFT_CONFIG_FILE), join('peft-adapter', PEFT_WEIGHTS_FILE), SAFETENSORS_FILE]));

      // the adapter: PEFT's names and shapes, exactly the adapted modules, θ_K's bytes
      const adapter = readSafetensors(join(out, 'peft-adapter', PEFT_WEIGHTS_FILE));
      expect([...adapter.keys].sort()).toEqual(modules.flatMap((m) => [`base_model.model.${m}.lora_A.weight`, `base_model.model.${m}.lora_B.weight`]).sort());
      const segments = made.engine.segments();
      layout.slots.forEach((s, i) => {
        const A = adapter.tensors.get(`base_model.model.${modules[i]}.lora_A.weight`)!;
        const B = adapter.tensors.get(`base_model.model.${modules[i]}.lora_B.weight`)!;
        expect(A.shape).toEqual([4, s.in]);
        expect(B.shape).toEqual([s.out, 4]);
        expect(A.bytes.equals(Buffer.from(segments[2 * i].data.buffer, segments[2 * i].data.byteOffset, segments[2 * i].data.byteLength))).toBe(true);
        expect(B.bytes.equals(Buffer.from(segments[2 * i + 1].data.buffer, segments[2 * i + 1].data.byteOffset, segments[2 * i + 1].data.byteLength))).toBe(true);
      });
      const cfg = JSON.parse(readFileSync(join(out, 'peft-adapter', PEFT_CONFIG_FILE), 'utf8'));
      expect(cfg).toMatchObject({ peft_type: 'LORA', r: 4, lora_alpha: 8, base_model_name_or_path: 'esopt-preset:tiny:seed-1' });
      const targetModules = new RegExp(`^${cfg.target_modules}$`);
      expect(modules.every((m) => targetModules.test(m))).toBe(true);
      expect(targetModules.test('model.layers.0.self_attn.k_proj')).toBe(false);

      // the merged model: nn.Linear's [out, in] = base + (α/r)·B·A on adapted modules, base bytes elsewhere
      const merged = readSafetensors(join(out, SAFETENSORS_FILE));
      const scale = 8 / 4;
      let moved = 0;
      for (const [i, w] of base.weights.entries()) {
        const name = w.name;
        const got = merged.tensors.get(name)!;
        const slot = layout.slots.findIndex((s) => s.name === name);
        if (slot === -1) {
          const want = w.dims.length === 2 && name !== 'model.embed_tokens.weight' ? transpose(w.data, w.dims[0], w.dims[1]) : w.data;
          expect(got.bytes.equals(Buffer.from(want.buffer, want.byteOffset, want.byteLength)), name).toBe(true);
          continue;
        }
        const [inW, outW] = w.dims;
        const A = floats(adapter.tensors.get(`base_model.model.${modules[slot]}.lora_A.weight`)!.bytes);
        const B = floats(adapter.tensors.get(`base_model.model.${modules[slot]}.lora_B.weight`)!.bytes);
        const m = floats(got.bytes);
        expect(got.shape).toEqual([outW, inW]);
        for (let o = 0; o < outW; o++) {
          for (let c = 0; c < inW; c++) {
            let ba = 0;
            for (let k = 0; k < 4; k++) ba += B[o * 4 + k] * A[k * inW + c];
            const want = base.weights[i].data[c * outW + o] + scale * ba;
            expect(Math.abs(m[o * inW + c] - want)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(want)));
            if (m[o * inW + c] !== base.weights[i].data[c * outW + o]) moved++;
          }
        }
      }
      expect(moved).toBeGreaterThan(0);

      // the merged ONNX model, loaded by plain onnxruntime, decodes as the lora engine's base row
      const onnxOut = join(root, 'onnx');
      await exportModel({ store: made.store, run: 'r', out: onnxOut, format: 'onnx' });
      const prompts = [[256, 72, 105], [256, 84, 119, 111]];
      const plain = await plainGreedy(join(onnxOut, 'model.onnx'), base.config, prompts, 6);
      const engine = (await made.engine.generate(prompts.map((promptIds) => ({ promptIds, member: { kind: 'base' }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 6, stop: [], ignoreEos: true })))).map((r) => r.tokenIds);
      expect(plain).toEqual(engine);

      // the portable run artifact describes runs over the model's own tensors: a LoRA run is refused
      await expect(buildRunArtifact(made.store, 'r')).rejects.toThrow(/a LoRA run's θ is its adapters, and the artifact format esopt-run\/2 describes runs over the model's own tensors/);
    } finally {
      await made.engine.close();
    }
  }, 60_000);
});

/** [rows, cols] row-major → [cols, rows]. */
function transpose(a: Float32Array, rows: number, cols: number): Float32Array {
  const t = new Float32Array(a.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = a[r * cols + c];
  return t;
}
