/**
 * θ_K as an ONNX model directory in the layout the model was loaded from. For an export directory the
 * original graph file is re-read unmodified and only θ's initializers get new data, each in the file's own
 * form — what the loader did to it undone: a weight it held transposed is transposed back, fp16 and bf16
 * weights are written in their dtype from the fp32 masters, and the head's copy of a tied embedding (which
 * the loader dropped) is written from the updated table, as a copy or transposed as the file held it.
 * External data stays external, in copies of the original data files patched in place. A built preset is
 * written as built presets are (model.onnx, model.onnx_data, config and tokenizer).
 */
import { basename, dirname } from 'node:path';
import type { ModelSpec } from '../../../shared/schemas/index.ts';
import type { LoadedModel } from '../../engine/model/model-dir.ts';
import { writePresetDir } from '../../engine/model/preset-dir.ts';
import { decoderTensorSpecs } from '../../engine/model/weights.ts';
import { patchInitializers, type InitializerHeader } from '../../engine/onnx/initializer-patch.ts';
import { DataType, DataTypeName } from '../../engine/onnx/proto.ts';
import { copyModelFiles, type CopiedFiles } from './model-files.ts';
import { storedBytes, transposed, type StoredType } from './stored-tensor.ts';

const STORED: Record<number, StoredType> = { [DataType.FLOAT]: 'fp32', [DataType.FLOAT16]: 'fp16', [DataType.BFLOAT16]: 'bf16' };

/** Writes θ (the model's weights now) into `out`, which exists and is empty. Returns the files other than the graph's. */
export function writeOnnxExport(model: LoadedModel, spec: ModelSpec, out: string): CopiedFiles & { graph: string } {
  if ('preset' in spec && !model.file) {
    const expected = decoderTensorSpecs(model.config).map((s) => s.name);
    const names = model.weights.map((w) => w.name);
    if (expected.join('\n') !== names.join('\n')) throw new Error(`preset ${spec.preset}: θ's tensors are not the preset's (${names.length} of ${expected.length})`);
    writePresetDir(out, spec.preset, spec.seed, model.weights);
    return { graph: 'model.onnx', copied: ['config.json', 'tokenizer.json', 'tokenizer_config.json'], skipped: [] };
  }
  if (!model.file) throw new Error(`${model.dir}: the model was not loaded from a file, so there is no original to write θ into`);
  const file = model.file;
  const theta = new Map(model.weights.map((w) => [w.name, w]));
  const transposedAtLoad = new Set(model.rewrites?.transposed ?? []);
  const tiedCopy = model.rewrites?.tiedCopy;
  const seen = new Map<string, number>();

  const data = (t: InitializerHeader): (() => Uint8Array) | undefined => {
    const w = theta.get(t.name);
    const copyOf = tiedCopy && t.name === tiedCopy.name ? theta.get(tiedCopy.embedding) : undefined;
    if (!w && !copyOf) return undefined;
    seen.set(t.name, (seen.get(t.name) ?? 0) + 1);
    const type = STORED[t.dataType];
    if (!type) throw new Error(`${file}: θ's initializer "${t.name}" is ${DataTypeName[t.dataType] ?? t.dataType} in the file; esopt writes float32, float16 and bfloat16`);
    const source = (w ?? copyOf)!;
    // the stored form is the loaded one transposed where the loader transposed it (or the copy held Eᵀ)
    const flip = w ? transposedAtLoad.has(t.name) : tiedCopy!.layout === 'transposed';
    const [rows, cols] = source.dims;
    const dims = flip ? [cols, rows] : source.dims;
    if (dims.join(',') !== t.dims.join(',')) throw new Error(`${file}: initializer "${t.name}" is [${t.dims.join(', ')}] in the file but θ gives [${dims.join(', ')}]; was the model directory changed since the run started?`);
    return () => storedBytes(flip ? transposed(source.data, rows, cols) : source.data, type);
  };
  const graph = basename(file);
  const { dataFiles } = patchInitializers(dirname(file), graph, out, data);
  const missing = [...theta.keys()].filter((name) => !seen.has(name));
  if (missing.length) throw new Error(`${file}: θ's ${missing.map((n) => `"${n}"`).join(', ')} ${missing.length === 1 ? 'is' : 'are'} not an initializer of the file; was the model directory changed since the run started?`);
  const twice = [...seen].filter(([, n]) => n > 1).map(([name]) => name);
  if (twice.length) throw new Error(`${file}: θ's ${twice.map((n) => `"${n}"`).join(', ')} name several initializers (in subgraphs); esopt cannot tell which one θ is`);
  return { graph, ...copyModelFiles(dirname(file), out, new Set([graph, ...dataFiles])) };
}
