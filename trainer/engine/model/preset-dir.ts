/**
 * Built presets as export directories: `writePresetDir` streams the weights to the external data file one
 * tensor at a time (the graph is built around empty tensors of the right dims), so building a 2.4 GB
 * preset holds one tensor, not θ; `cachedPresetDir` builds a preset once under the cache root and reuses it.
 */
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildDecoder } from './build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from './byte-tokenizer.ts';
import { checkDecoderGraph } from './graph-check.ts';
import type { ModelConfig } from './config.ts';
import { PRESETS, type PresetName } from './presets.ts';
import { decoderTensors, decoderTensorSpecs } from './weights.ts';
import { MODEL_FILE, writeOnnxStreaming } from '../onnx/external-data.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';

/** Where cached presets live unless ESOPT_MODEL_CACHE says otherwise (relative to the working directory). */
export const DEFAULT_MODEL_CACHE = '.esopt/models';

/** The preset's directory, its θ the seed's initial weights or `tensors` (a trained θ, by the preset's names). */
export function writePresetDir(dir: string, preset: PresetName, seed: number, tensors: Iterable<NamedTensor> = decoderTensors(PRESETS[preset], seed)): void {
  const config = PRESETS[preset];
  const graph = buildDecoder(config, decoderTensorSpecs(config).map((s) => ({ name: s.name, dims: s.dims, data: new Float32Array(0) })));
  checkDecoderGraph(graph, config, `preset ${preset}`);
  mkdirSync(dir, { recursive: true });
  writeOnnxStreaming(dir, graph, tensors);
  writePresetFiles(dir, preset);
}

/** The preset's config.json and byte-level tokenizer files (every file of its directory but the graph's). */
export function writePresetFiles(dir: string, preset: PresetName, config: ModelConfig = PRESETS[preset]): void {
  writeFileSync(join(dir, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(byteTokenizerJson()));
  writeFileSync(join(dir, 'tokenizer_config.json'), `${JSON.stringify(byteTokenizerConfig(), null, 2)}\n`);
}

/**
 * The preset's directory under `root`, built there first if absent. It is written beside under a
 * process-unique name and renamed into place, so a build that dies leaves no directory that looks whole
 * and two processes building at once both end up with one complete directory.
 */
export function cachedPresetDir(preset: PresetName, seed: number, root = process.env.ESOPT_MODEL_CACHE || DEFAULT_MODEL_CACHE): string {
  const dir = join(root, `${preset}-seed${seed}`);
  if (existsSync(join(dir, MODEL_FILE))) return dir;
  const partial = `${dir}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  try {
    writePresetDir(partial, preset, seed);
    renameSync(partial, dir);
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    // another process built it meanwhile: theirs is as good (same preset, same seed, same bits)
    if (existsSync(join(dir, MODEL_FILE))) return dir;
    throw new Error(`preset ${preset}: could not build it into ${dir}: ${(err as Error).message}`);
  }
  return dir;
}
