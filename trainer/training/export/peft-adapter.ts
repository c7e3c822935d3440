/**
 * LoRA-ES adapters in PEFT's layout, loadable with `PeftModel.from_pretrained(base, dir)`: adapter_config.json
 * and adapter_model.safetensors whose tensors are `base_model.model.<module>.lora_A.weight` (r × in) and
 * `…lora_B.weight` (out × r), fp32. A slot's name is the module's Hugging Face path (`model.layers.0.self_attn.q_proj`).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loraFactors, type LoraLayout } from '../../../shared/lora.ts';
import { writeSafetensors } from './safetensors-writer.ts';

export const PEFT_CONFIG_FILE = 'adapter_config.json';
export const PEFT_WEIGHTS_FILE = 'adapter_model.safetensors';

export interface PeftAdapterInfo {
  /** The base model's name or path, as PEFT records it. */
  baseModel: string;
  alpha: number;
}

export function writePeftAdapter(dir: string, layout: LoraLayout, theta: Float32Array, info: PeftAdapterInfo): void {
  const modules = layout.slots.map((s) => s.name);
  const bad = modules.find((m) => !/^[A-Za-z_][\w.]*$/.test(m) || m.endsWith('.weight'));
  if (bad !== undefined) throw new Error(`peft adapter: "${bad}" is not a module path (model.layers.0.self_attn.q_proj)`);
  mkdirSync(dir, { recursive: true });
  const entries = layout.slots.flatMap((s) => {
    const { A, B } = loraFactors(theta, layout, s);
    const bytes = (t: Float32Array) => () => new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
    return [
      { name: `base_model.model.${s.name}.lora_A.weight`, dtype: 'F32' as const, shape: [layout.rank, s.in], bytes: bytes(A) },
      { name: `base_model.model.${s.name}.lora_B.weight`, dtype: 'F32' as const, shape: [s.out, layout.rank], bytes: bytes(B) },
    ];
  });
  writeSafetensors(join(dir, PEFT_WEIGHTS_FILE), entries);
  // A string target_modules is a regex PEFT full-matches against module names: exactly the adapted modules.
  const targetModules = modules.map((m) => m.replace(/\./g, '\\.')).join('|');
  const config = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: info.baseModel,
    r: layout.rank,
    lora_alpha: info.alpha,
    lora_dropout: 0,
    bias: 'none',
    fan_in_fan_out: false,
    use_rslora: false,
    init_lora_weights: true,
    inference_mode: true,
    target_modules: `(?:${targetModules})`,
  };
  writeFileSync(join(dir, PEFT_CONFIG_FILE), `${JSON.stringify(config, null, 2)}\n`);
}
