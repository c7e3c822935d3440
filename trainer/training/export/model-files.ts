/**
 * The files of a model directory that an export carries over: config.json, the tokenizer files,
 * generation_config.json, chat templates and any other top-level file — except graphs and weights, which
 * the export writes itself from θ_K (a stale copy of the original weights must never sit beside them).
 */
import { copyFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Graphs, their external data and weight files of any framework, and the indexes of sharded weights. */
const WEIGHTS = /\.(onnx|ort|onnx_data|onnx\.data|data|safetensors|bin|pt|pth|ckpt|gguf|ggml|h5|msgpack|npz|tflite|mlmodel|ot)$|\.index\.json$|_data$/i;

export interface CopiedFiles {
  copied: string[];
  /** Files and folders left out, each with the reason. */
  skipped: Array<{ file: string; why: string }>;
}

/** Copies every top-level non-weight file of `src` into `out` except those in `except` (written by the export). */
export function copyModelFiles(src: string, out: string, except: ReadonlySet<string> = new Set()): CopiedFiles {
  const result: CopiedFiles = { copied: [], skipped: [] };
  for (const name of readdirSync(src).sort()) {
    const path = join(src, name);
    if (except.has(name)) continue;
    if (statSync(path).isDirectory()) result.skipped.push({ file: name, why: 'a folder (an export carries the top-level files)' });
    else if (WEIGHTS.test(name)) result.skipped.push({ file: name, why: 'a graph or weight file: the export writes θ_K itself' });
    else {
      copyFileSync(path, join(out, name));
      result.copied.push(name);
    }
  }
  return result;
}
