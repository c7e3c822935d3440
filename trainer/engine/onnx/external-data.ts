/**
 * Writes a graph as `model.onnx` plus one external-data file, the layout optimum and onnx's own writer
 * use: each initializer of EXTERNAL_MIN_BYTES or more is written to the data file (64-byte aligned) and
 * referenced by location, offset and length. Tensors are written one by one, never concatenated, so the
 * graph may hold more than protobuf's 2 GiB and nothing is copied in memory on the way.
 */
import { closeSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { NamedTensor } from './named-tensor.ts';
import { bytesOf, encodeModel, type ModelProto, type TensorProto } from './proto.ts';

export const MODEL_FILE = 'model.onnx';
const DATA_FILE = 'model.onnx_data';
/** Tensors at least this large go to the external data file (as optimum does for big tensors). */
const EXTERNAL_MIN_BYTES = 1024;
const ALIGN = 64;
/** fs.writeSync takes at most 2^31 − 1 bytes a call. */
const WRITE_MAX = 2 ** 30;

type ExternalEntry = Pick<TensorProto, 'dataLocation' | 'externalData'>;

/** Appends tensors' bytes to the data file, each at a 64-byte boundary, and says where they went. */
function appender(fd: number): (raw: Uint8Array) => ExternalEntry {
  let offset = 0;
  return (raw) => {
    offset += (ALIGN - (offset % ALIGN)) % ALIGN; // the gap reads back as zeros
    for (let done = 0; done < raw.length; ) done += writeSync(fd, raw, done, Math.min(raw.length - done, WRITE_MAX), offset + done);
    const entry = { dataLocation: 1, externalData: [{ key: 'location', value: DATA_FILE }, { key: 'offset', value: String(offset) }, { key: 'length', value: String(raw.length) }] };
    offset += raw.length;
    return entry;
  };
}

export function writeOnnxWithExternalData(dir: string, model: ModelProto): void {
  writeOnnxStreaming(dir, model, []);
}

/**
 * The same layout, with the bytes of `tensors` taken from the iterable as it yields them (each written,
 * then free to be collected) instead of from the graph, whose initializers of those names may be empty:
 * a model larger than memory allows twice is written holding one tensor at a time.
 */
export function writeOnnxStreaming(dir: string, model: ModelProto, tensors: Iterable<NamedTensor>): void {
  const fd = openSync(join(dir, DATA_FILE), 'w');
  let initializer: TensorProto[];
  try {
    const append = appender(fd);
    const streamed = new Map<string, ExternalEntry>();
    for (const t of tensors) streamed.set(t.name, append(bytesOf(t.data)));
    initializer = model.graph.initializer.map((t): TensorProto => {
      const entry = streamed.get(t.name);
      if (entry) return { ...t, rawData: undefined, ...entry };
      const raw = t.rawData;
      if (!raw || raw.length < EXTERNAL_MIN_BYTES) return t;
      return { ...t, rawData: undefined, ...append(raw) };
    });
    const names = new Set(model.graph.initializer.map((t) => t.name));
    const stray = [...streamed.keys()].find((n) => !names.has(n));
    if (stray !== undefined) throw new Error(`${join(dir, MODEL_FILE)}: tensor "${stray}" was given but the graph has no initializer of that name`);
  } finally {
    closeSync(fd);
  }
  writeFileSync(join(dir, MODEL_FILE), encodeModel({ ...model, graph: { ...model.graph, initializer } }));
}
