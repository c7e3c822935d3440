import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { initLoraAdapters, loraLayout, mergeLora } from '../../shared/lora.ts';
import { PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE, writePeftAdapter } from '../../trainer/training/export/peft-adapter.ts';
import { readSafetensors } from './helpers/read-safetensors.ts';

const dir = mkdtempSync(join(tmpdir(), 'peft-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('PEFT adapter export', () => {
  const layout = loraLayout(
    [
      { name: 'model.layers.0.self_attn.q_proj', in: 8, out: 6 },
      { name: 'model.layers.1.mlp.down_proj', in: 12, out: 8 },
    ],
    { rank: 2, alpha: 4 },
  );
  const theta = initLoraAdapters(layout, 5);
  for (let i = 0; i < theta.length; i++) if (theta[i] === 0) theta[i] = 0.01 * (i % 7) - 0.03;

  it('writes lora_A (r×in) and lora_B (out×r) under PEFT names, and a config PEFT reads', () => {
    writePeftAdapter(dir, layout, theta, { baseModel: 'Qwen/Qwen3-0.6B', alpha: 4 });
    const st = readSafetensors(join(dir, PEFT_WEIGHTS_FILE));
    expect(st.keys).toEqual([
      'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight',
      'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight',
      'base_model.model.model.layers.1.mlp.down_proj.lora_A.weight',
      'base_model.model.model.layers.1.mlp.down_proj.lora_B.weight',
    ]);
    const cfg = JSON.parse(readFileSync(join(dir, PEFT_CONFIG_FILE), 'utf8'));
    expect(cfg).toMatchObject({ peft_type: 'LORA', r: 2, lora_alpha: 4, base_model_name_or_path: 'Qwen/Qwen3-0.6B' });
    const re = new RegExp(`^${cfg.target_modules}$`);
    expect(re.test('model.layers.0.self_attn.q_proj')).toBe(true);
    expect(re.test('model.layers.0.self_attn.v_proj')).toBe(false);
    expect(re.test('model.layers.1.self_attn.q_proj')).toBe(false);

    // Read back: merged = base + scale·B·A (in W's x·W orientation) from the file's own tensors.
    const s = layout.slots[1];
    const f32 = (name: string) => new Float32Array(Uint8Array.from(st.tensors.get(name)!.bytes).buffer);
    const A = f32(`base_model.model.${s.name}.lora_A.weight`);
    const B = f32(`base_model.model.${s.name}.lora_B.weight`);
    expect(st.tensors.get(`base_model.model.${s.name}.lora_A.weight`)!.shape).toEqual([2, 12]);
    expect(st.tensors.get(`base_model.model.${s.name}.lora_B.weight`)!.shape).toEqual([8, 2]);
    const W = Float32Array.from({ length: s.in * s.out }, (_, i) => Math.sin(i));
    const merged = mergeLora(W, theta, layout, s);
    const scale = cfg.lora_alpha / cfg.r;
    for (let i = 0; i < s.in; i++) {
      for (let j = 0; j < s.out; j++) {
        const ba = B[j * 2] * A[i] + B[j * 2 + 1] * A[12 + i];
        expect(merged[i * s.out + j]).toBeCloseTo(W[i * s.out + j] + scale * ba, 5);
      }
    }
  });

  it('refuses a tensor name where a module path belongs', () => {
    const bad = loraLayout([{ name: 'model.layers.0.self_attn.q_proj.weight', in: 2, out: 2 }], { rank: 1, alpha: 1 });
    expect(() => writePeftAdapter(join(dir, 'bad'), bad, new Float32Array(bad.length), { baseModel: 'x', alpha: 1 })).toThrow(/not a module path/);
  });
});
