/** Flag sets several commands share: which model to load, and where onnxruntime runs it. */
import type { LocalModelSpec } from '../../../shared/schemas/index.ts';
import { PRESETS } from '../../engine/model/presets.ts';
import { stringFlags } from './args.ts';

/** A preset's name (presets.ts) is a preset, anything else an export directory. */
export function modelSpecFlag(value: string, seed: number): LocalModelSpec {
  return value in PRESETS ? ({ preset: value, seed } as LocalModelSpec) : { dir: value };
}

/** `--model NAME|DIR` and `--provider cpu|cuda|webgpu`, as strings for the options schema they feed. */
export const modelFlags = stringFlags('model', 'provider');
