/** Option schemas several benchmarks share: sizes, repeats, the execution provider and the model. */
import { z } from 'zod';
import { ExecutionProvider } from '../../../shared/execution-provider.ts';
import { modelSpecFlag } from '../../engine/model/presets.ts';

export const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const Provider = ExecutionProvider.default('cpu');

/** onnxruntime intra-op threads; unset leaves onnxruntime's own default. */
export const Threads = int(1, 256).optional();

export const Repeats = (fallback: number, max = 50) => int(1, max).default(fallback);

/** `8,32` → [8, 32]. */
export const BatchList = (fallback: string) =>
  z
    .string()
    .regex(/^\d+(,\d+)*$/, 'comma-separated batch sizes')
    .default(fallback)
    .transform((s) => s.split(',').map(Number));

/** `--model NAME|DIR` as given (a preset's name or an export directory; engine/model/presets.ts `modelSpecFlag` tells them apart). */
export const ModelName = (fallback: string) => z.string().min(1).default(fallback);

/** The same, as the ModelSpec the engine takes (seed 0). */
export const ModelSpecOption = (fallback: string) => ModelName(fallback).transform((name) => modelSpecFlag(name, 0));
