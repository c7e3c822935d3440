/**
 * Model directories in the Hugging Face / optimum export layout: model.onnx (+ external data),
 * config.json, tokenizer.json, tokenizer_config.json. `saveModelDir` writes built models in exactly this
 * layout and `loadModelDir` reads built and downloaded ones through the same path. Errors name the file,
 * the tensor or the op.
 */
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readSync, statSync, writeFileSync } from 'node:fs';
import { join, normalize, relative } from 'node:path';
import { ChatTokenizer } from './chat-tokenizer.ts';
import { ModelConfig } from './config.ts';
import { checkDecoderGraph } from './graph-check.ts';
import { MODEL_FILE, writeOnnxWithExternalData } from '../onnx/external-data.ts';
import { bytesOf, DataType, DataTypeName, decodeModel, type ModelProto, type TensorProto } from '../onnx/proto.ts';
import { logitsAtLastPosition } from './logits-last.ts';
import { isPerturbable } from './perturbable.ts';
import { tieHead } from './tied-weights.ts';
import { foldWeightTransposes } from './transposed-weights.ts';
import { EXPORT_COMMAND } from './export-layout.ts';
import { inlineCacheBranch } from './merged-decoder.ts';
import { fp32Master, HalfTheta } from './half-theta.ts';
import { widenBf16 } from './bf16-widening.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';

const REQUIRED = ['config.json', 'tokenizer.json', 'tokenizer_config.json'] as const;
const MERGED_FILE = 'decoder_model_merged.onnx';
const WITH_PAST_FILE = 'decoder_with_past_model.onnx';

export interface LoadedModel {
  dir: string;
  /** The graph's file, when loaded (model.onnx, or the merged or with-past decoder found instead). */
  file?: string;
  config: ModelConfig;
  tokenizer: ChatTokenizer;
  /** The graph with every initializer's data inline (external data read in). */
  graph: ModelProto;
  /**
   * The perturbable θ in canonical (initializer) order: views onto the graph's fp32 initializer data, or
   * the fp32 masters of fp16 ones (`half`).
   */
  weights: NamedTensor[];
  /** θ's fp16 weights (an fp16 export), fed to sessions cast from their masters; absent for fp32. */
  half?: HalfTheta;
  /** What loading changed in the file's θ (a loaded export only), so an export can write the original form back. */
  rewrites?: LoadRewrites;
}

/** The loader's changes to θ's initializers, each undone by writing the original form (trainer/training/export/). */
export interface LoadRewrites {
  /** The head's own copy of the embedding table that the tie dropped (tied-weights.ts), and how it held the table. */
  tiedCopy?: { name: string; embedding: string; layout: 'copy' | 'transposed' };
  /** Weights the file reads through a Transpose, held transposed since (transposed-weights.ts). */
  transposed: string[];
  /** Weights the file stores in bf16, held widened to fp32 (bf16-widening.ts). */
  bf16: string[];
}

export interface SaveInput {
  config: ModelConfig;
  graph: ModelProto;
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
}

export function saveModelDir(dir: string, m: SaveInput): void {
  mkdirSync(dir, { recursive: true });
  writeOnnxWithExternalData(dir, m.graph);
  writeFileSync(join(dir, 'config.json'), `${JSON.stringify(m.config, null, 2)}\n`);
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(m.tokenizerJson));
  writeFileSync(join(dir, 'tokenizer_config.json'), `${JSON.stringify(m.tokenizerConfig, null, 2)}\n`);
}

function readJson(dir: string, file: string): Record<string, unknown> {
  const text = readFileSync(join(dir, file), 'utf8');
  try {
    const v: unknown = JSON.parse(text);
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error('not a JSON object');
    return v as Record<string, unknown>;
  } catch (err) {
    throw new Error(`${join(dir, file)}: ${(err as Error).message}`);
  }
}

/**
 * The loader's cheap checks, before anything large is read: the directory exists with a graph file and
 * the required files, and config.json parses as a model config. Returns the graph's file and the config.
 */
export function checkModelDir(dir: string): { modelFile: string; config: ModelConfig } {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`model directory ${dir} does not exist`);
  // model.onnx, else optimum's merged decoder, else the with-past half of its legacy split
  const modelFile = [MODEL_FILE, MERGED_FILE, WITH_PAST_FILE].find((f) => existsSync(join(dir, f))) ?? MODEL_FILE;
  const missing = [modelFile, ...REQUIRED].filter((f) => !existsSync(join(dir, f)));
  if (missing.length) throw new Error(`model directory ${dir} is missing ${missing.join(', ')}${missing[0] === MODEL_FILE ? ` (or ${MERGED_FILE} / ${WITH_PAST_FILE}; export with ${EXPORT_COMMAND})` : ''}`);

  const parsed = ModelConfig.safeParse(readJson(dir, 'config.json'));
  if (!parsed.success) {
    throw new Error(`${join(dir, 'config.json')}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  }
  return { modelFile, config: parsed.data };
}

export function loadModelDir(dir: string): LoadedModel {
  const { modelFile, config } = checkModelDir(dir);
  const tokenizer = new ChatTokenizer(readJson(dir, 'tokenizer.json'), readJson(dir, 'tokenizer_config.json'), join(dir, 'tokenizer.json'));

  const modelPath = join(dir, modelFile);
  const graph = decodeModel(readFileSync(modelPath), modelPath);
  inlineCacheBranch(graph, modelPath);
  for (const t of graph.graph.initializer) loadTensorData(dir, t, modelPath);
  const bf16 = graph.graph.initializer.filter((t) => t.dataType === DataType.BFLOAT16).map((t) => t.name);
  // bf16 runs as fp32 (bf16-widening.ts): its weights load as fp32 initializers, i.e. plain fp32 θ
  widenBf16(graph, modelPath);
  checkDecoderGraph(graph, config, modelPath);
  const tie = tieHead(graph, config, modelPath);
  if (tie.warning) process.emitWarning(tie.warning);
  // after the tie: a Transpose over the embedding table is the tied head's, not a weight's own
  const transposed = foldWeightTransposes(graph);
  logitsAtLastPosition(graph);

  const weights: NamedTensor[] = [];
  const half = new Set<string>();
  for (const t of graph.graph.initializer) {
    if (!isPerturbable(t, graph.graph)) continue;
    const raw = t.rawData as Uint8Array;
    if (t.dataType === DataType.FLOAT16) half.add(t.name);
    weights.push({ name: t.name, dims: t.dims, data: t.dataType === DataType.FLOAT16 ? fp32Master(t) : new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4) });
  }
  if (weights.length === 0) throw new Error(`${modelPath}: no perturbable weights found (fp32 or fp16 MatMul/Gemm weights, Gather tables, *.weight/*.bias)`);
  const rewrites: LoadRewrites = {
    transposed,
    bf16: bf16.filter((name) => weights.some((w) => w.name === name)),
    ...(tie.removed && tie.removedLayout && tie.embedding ? { tiedCopy: { name: tie.removed, embedding: tie.embedding, layout: tie.removedLayout } } : {}),
  };
  return { dir, file: modelPath, config, tokenizer, graph, weights, rewrites, ...(half.size ? { half: new HalfTheta(graph.graph.initializer, half) } : {}) };
}

const BYTES_PER: Record<number, number> = { [DataType.FLOAT]: 4, [DataType.FLOAT16]: 2, [DataType.BFLOAT16]: 2, [DataType.INT64]: 8, [DataType.INT32]: 4, [DataType.BOOL]: 1, [DataType.UINT8]: 1, [DataType.INT8]: 1, [DataType.DOUBLE]: 8 };

/**
 * Bring a tensor's data inline as aligned raw bytes: external data is read from its file, typed fields are
 * converted. Unsupported dtypes fail here, naming the tensor.
 */
function loadTensorData(dir: string, t: TensorProto, modelPath: string): void {
  const size = BYTES_PER[t.dataType];
  if (size === undefined) throw new Error(`${modelPath}: initializer "${t.name}" has unsupported dtype ${DataTypeName[t.dataType] ?? t.dataType} (esopt reads ${Object.keys(BYTES_PER).map((k) => DataTypeName[Number(k)]).join(', ')} initializers)`);
  const count = t.dims.reduce((a, b) => a * b, 1);
  const out = new Uint8Array(count * size);
  if (t.dataLocation === 1) {
    const entry = (k: string) => t.externalData?.find((e) => e.key === k)?.value;
    const location = entry('location');
    if (!location) throw new Error(`${modelPath}: initializer "${t.name}" is external but names no location`);
    const file = normalize(join(dir, location));
    if (relative(dir, file).startsWith('..')) throw new Error(`${modelPath}: initializer "${t.name}" points outside the model directory (${location})`);
    if (!existsSync(file)) throw new Error(`${file}: missing external data file (needed by initializer "${t.name}")`);
    const offset = Number(entry('offset') ?? 0);
    const length = Number(entry('length') ?? out.length);
    if (length !== out.length) throw new Error(`${file}: initializer "${t.name}" has ${length} bytes of external data, expected ${out.length} for dims [${t.dims.join(', ')}]`);
    if (offset + length > statSync(file).size) throw new Error(`${file}: initializer "${t.name}" reads past the end of the file (offset ${offset}, length ${length})`);
    const fd = openSync(file, 'r');
    try {
      readSync(fd, out, 0, length, offset);
    } finally {
      closeSync(fd);
    }
  } else if (t.rawData && t.rawData.length) {
    if (t.rawData.length !== out.length) throw new Error(`${modelPath}: initializer "${t.name}" has ${t.rawData.length} bytes, expected ${out.length}`);
    out.set(t.rawData);
  } else if (t.dataType === DataType.FLOAT && t.floatData?.length) out.set(bytesOf(Float32Array.from(t.floatData)));
  else if ((t.dataType === DataType.FLOAT16 || t.dataType === DataType.BFLOAT16) && t.int32Data?.length) out.set(new Uint8Array(Uint16Array.from(t.int32Data).buffer));
  else if (t.dataType === DataType.INT64 && t.int64Data?.length) out.set(bytesOf(BigInt64Array.from(t.int64Data.map(BigInt))));
  else if (t.dataType === DataType.INT32 && t.int32Data?.length) out.set(bytesOf(Int32Array.from(t.int32Data)));
  else if (count !== 0 && (t.dataType === DataType.BOOL || t.dataType === DataType.UINT8 || t.dataType === DataType.INT8) && t.int32Data?.length) out.set(Uint8Array.from(t.int32Data));
  else if (count !== 0) throw new Error(`${modelPath}: initializer "${t.name}" has no data`);
  t.rawData = out;
  t.dataLocation = 0;
  t.externalData = [];
  t.floatData = [];
  t.int32Data = [];
  t.int64Data = [];
}
