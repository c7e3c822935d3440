/**
 * θ_K as `model.safetensors` with the Hugging Face parameter names and layouts (hf-names.ts), each tensor
 * in the model's dtype (fp16 stays F16, bf16 stays BF16), beside the model directory's config.json — its
 * tie_word_embeddings set to what the file holds — and tokenizer files. A built preset's config and
 * byte-level tokenizer are written as its directory holds them.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ModelSpec } from '../../../shared/schemas/index.ts';
import type { LoadedModel } from '../../engine/model/model-dir.ts';
import { writePresetFiles } from '../../engine/model/preset-dir.ts';
import { hfParameters } from './hf-names.ts';
import { copyModelFiles, type CopiedFiles } from './model-files.ts';
import { writeSafetensors, type SafetensorsDtype } from './safetensors-writer.ts';
import { storedBytes, transposed } from './stored-tensor.ts';

export const SAFETENSORS_FILE = 'model.safetensors';

export function writeSafetensorsExport(model: LoadedModel, spec: ModelSpec, out: string): CopiedFiles {
  const { tensors, tiedHead } = hfParameters(model);
  const bf16 = new Set(model.rewrites?.bf16 ?? []);
  const dtypeOf = (name: string): SafetensorsDtype => (model.half?.names.has(name) ? 'F16' : bf16.has(name) ? 'BF16' : 'F32');
  writeSafetensors(
    join(out, SAFETENSORS_FILE),
    tensors.map((t) => {
      const w = model.weights[t.source];
      const dtype = dtypeOf(w.name);
      return {
        name: t.name,
        dtype,
        shape: t.dims,
        bytes: () => storedBytes(t.transpose ? transposed(w.data, w.dims[0], w.dims[1]) : w.data, dtype === 'F16' ? 'fp16' : dtype === 'BF16' ? 'bf16' : 'fp32'),
      };
    }),
  );
  // the file holds the head once when tied and apart when not: config.json says which, whatever a family's default
  const config = { ...model.config, tie_word_embeddings: tiedHead };
  if ('preset' in spec && !model.file) {
    writePresetFiles(out, spec.preset, config);
    return { copied: ['config.json', 'tokenizer.json', 'tokenizer_config.json'], skipped: [] };
  }
  const src = model.file ? dirname(model.file) : model.dir;
  const files = copyModelFiles(src, out, new Set([SAFETENSORS_FILE]));
  const original = JSON.parse(readFileSync(join(src, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(out, 'config.json'), `${JSON.stringify({ ...original, tie_word_embeddings: tiedHead }, null, 2)}\n`);
  return files;
}
