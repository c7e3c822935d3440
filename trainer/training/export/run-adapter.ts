/**
 * A LoRA run's θ_K as a PEFT adapter beside its merged model: each slot renamed from the ONNX weight it
 * adapts to the Hugging Face module that holds that weight (`model.layers.0.self_attn.q_proj`, hf-names.ts),
 * then written by peft-adapter.ts. A model whose weights have no Hugging Face names gets no adapter, with
 * the reason, and its merged model is still exported.
 */
import type { ModelSpec } from '../../../shared/schemas/index.ts';
import { hfParameters } from './hf-names.ts';
import type { LoraTheta } from './lora-theta.ts';
import { writePeftAdapter } from './peft-adapter.ts';
import type { LoadedModel } from '../../engine/model/model-dir.ts';

/** Where in an export the adapter goes. */
export const ADAPTER_DIR = 'peft-adapter';

/** What PEFT records as the base model: a directory's path, a pushed model's name, a preset's name. */
function baseModelName(spec: ModelSpec): string {
  if ('dir' in spec) return spec.dir;
  if ('name' in spec) return spec.name;
  return `esopt-preset:${spec.preset}:seed-${spec.seed}`;
}

/** Writes the adapter into `dir`; returns why not when the modules cannot be named. */
export function writeRunAdapter(dir: string, model: LoadedModel, spec: ModelSpec, theta: LoraTheta, alpha: number): { written: true } | { written: false; why: string } {
  let names: Map<number, string>;
  try {
    names = new Map(hfParameters(model).tensors.map((t) => [t.source, t.name]));
  } catch (err) {
    return { written: false, why: (err as Error).message };
  }
  const slots = theta.layout.slots.map((s, i) => {
    const hf = names.get(theta.weights[i]);
    if (!hf?.endsWith('.weight')) throw new Error(`lora export: the adapted matrix "${s.name}" has no Hugging Face module name (${hf ?? 'none'})`);
    return { ...s, name: hf.slice(0, -'.weight'.length) };
  });
  writePeftAdapter(dir, { ...theta.layout, slots }, theta.adapters, { baseModel: baseModelName(spec), alpha });
  return { written: true };
}
