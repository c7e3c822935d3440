/**
 * A model from the run config: a built preset (graph, weights and tokenizer made in memory from a seed; a
 * cached preset built once to disk and loaded from there) or an export directory read by the loader. All
 * come out as the same LoadedModel.
 */
import type { LocalModelSpec } from '../../../shared/schemas/index.ts';
import { buildDecoder } from './build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from './byte-tokenizer.ts';
import { ChatTokenizer } from './chat-tokenizer.ts';
import { checkDecoderGraph } from './graph-check.ts';
import { logitsAtLastPosition } from './logits-last.ts';
import { loadModelDir, type LoadedModel } from './model-dir.ts';
import { cachedPresetDir, writePresetDir } from './preset-dir.ts';
import { CACHED_PRESETS, PRESETS, type PresetName } from './presets.ts';
import { initDecoderWeights } from './weights.ts';

export function buildPreset(preset: PresetName, seed: number): LoadedModel {
  const config = PRESETS[preset];
  const weights = initDecoderWeights(config, seed);
  const graph = buildDecoder(config, weights);
  checkDecoderGraph(graph, config, `preset ${preset}`);
  logitsAtLastPosition(graph);
  return { dir: `preset:${preset}`, config, tokenizer: new ChatTokenizer(byteTokenizerJson(), byteTokenizerConfig()), graph, weights };
}

/** Write a built preset as an export directory (the layout `loadModelDir` reads). */
export function savePreset(dir: string, preset: PresetName, seed: number): void {
  writePresetDir(dir, preset, seed);
}

/** Synchronous: a named model is resolved to its cached directory first (trainer/training/model-store/resolve-model.ts). */
export function openModel(spec: LocalModelSpec): LoadedModel {
  if (!('preset' in spec)) return loadModelDir(spec.dir);
  return CACHED_PRESETS.has(spec.preset) ? loadModelDir(cachedPresetDir(spec.preset, spec.seed)) : buildPreset(spec.preset, spec.seed);
}
