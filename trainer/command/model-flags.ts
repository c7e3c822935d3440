/** Flag sets several commands share: which model to load, and where onnxruntime runs it. */
import { z } from 'zod';
import type { ModelSpec } from '../../shared/schemas/index.ts';
import { PRESETS } from '../model/presets.ts';
import { flag, type Parsed } from './args.ts';

/** A preset's name (presets.ts) is a preset, anything else an export directory. */
export function modelSpecFlag(value: string, seed: number): ModelSpec {
  return value in PRESETS ? ({ preset: value, seed } as ModelSpec) : { dir: value };
}

/** `--model NAME|DIR` (seeded 0) and `--provider cpu|cuda`, with the command's default model. */
export const modelFlagOptions = (defaultModel: string) =>
  ({ model: { type: 'string', default: defaultModel }, provider: { type: 'string', default: 'cpu' } }) as const;

export function modelFlags(values: Parsed['values']): { model: ModelSpec; provider: 'cpu' | 'cuda' } {
  return { model: modelSpecFlag(flag(values, 'model', z.string().min(1)), 0), provider: flag(values, 'provider', z.enum(['cpu', 'cuda'])) };
}
