/**
 * The files of a model directory that an export carries over: only the top-level files a model is loaded
 * with (its config, generation settings, tokenizer and chat template) and its licence — never graphs or
 * weights, which the export writes itself from θ_K (a stale copy of the original weights must never sit
 * beside them), and never anything else the directory happens to hold (notes, keys, caches): an export
 * archive is handed to whoever may download the run's model.
 */
import { copyFileSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { join, relative, isAbsolute } from 'node:path';

/** Graphs, their external data and weight files of any framework, and the indexes of sharded weights. */
const WEIGHTS = /\.(onnx|ort|onnx_data|onnx\.data|data|safetensors|bin|pt|pth|ckpt|gguf|ggml|h5|msgpack|npz|tflite|mlmodel|ot)$|\.index\.json$|_data$/i;

/** What loaders (transformers, tokenizers, onnxruntime-genai, this engine) read beside the weights, and a licence. */
const NEEDED = new Set([
  'config.json',
  'generation_config.json',
  'genai_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'added_tokens.json',
  'vocab.json',
  'vocab.txt',
  'merges.txt',
  'tokenizer.model',
  'spiece.model',
  'sentencepiece.bpe.model',
  'chat_template.jinja',
  'chat_template.json',
  'preprocessor_config.json',
  'LICENSE',
  'LICENSE.txt',
  'LICENSE.md',
  'NOTICE',
]);

export interface CopiedFiles {
  copied: string[];
  /** Files and folders left out, each with the reason. */
  skipped: Array<{ file: string; why: string }>;
}

/** Whether `path`, links resolved, is inside `dir` (links resolved). */
function staysInside(dir: string, path: string): boolean {
  const rel = relative(realpathSync(dir), realpathSync(path));
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}

/** Copies the top-level files of `src` a model needs (NEEDED) into `out`, except those in `except` (written by the export). */
export function copyModelFiles(src: string, out: string, except: ReadonlySet<string> = new Set()): CopiedFiles {
  const result: CopiedFiles = { copied: [], skipped: [] };
  for (const name of readdirSync(src).sort()) {
    const path = join(src, name);
    if (except.has(name)) continue;
    if (statSync(path).isDirectory()) result.skipped.push({ file: name, why: 'a folder (an export carries the top-level files)' });
    else if (WEIGHTS.test(name)) result.skipped.push({ file: name, why: 'a graph or weight file: the export writes θ_K itself' });
    else if (!NEEDED.has(name)) result.skipped.push({ file: name, why: 'not a file a model is loaded with (config, tokenizer, chat template, licence)' });
    else if (!staysInside(src, path)) result.skipped.push({ file: name, why: "a link out of the model's directory" });
    else {
      copyFileSync(path, join(out, name));
      result.copied.push(name);
    }
  }
  return result;
}
