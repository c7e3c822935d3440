/**
 * Writes a graph as `model.onnx` plus one external-data file, the layout optimum and onnx's own writer
 * use: each initializer of EXTERNAL_MIN_BYTES or more is written to the data file (64-byte aligned) and
 * referenced by location, offset and length. Tensors are written one by one, never concatenated, so the
 * graph may hold more than protobuf's 2 GiB and nothing is copied in memory on the way.
 */
import { closeSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { encodeModel, type ModelProto, type TensorProto } from './proto.ts';

export const MODEL_FILE = 'model.onnx';
const DATA_FILE = 'model.onnx_data';
/** Tensors at least this large go to the external data file (as optimum does for big tensors). */
const EXTERNAL_MIN_BYTES = 1024;
const ALIGN = 64;
/** fs.writeSync takes at most 2^31 − 1 bytes a call. */
const WRITE_MAX = 2 ** 30;

export function writeOnnxWithExternalData(dir: string, model: ModelProto): void {
  const fd = openSync(join(dir, DATA_FILE), 'w');
  let initializer: TensorProto[];
  try {
    let offset = 0;
    initializer = model.graph.initializer.map((t): TensorProto => {
      const raw = t.rawData;
      if (!raw || raw.length < EXTERNAL_MIN_BYTES) return t;
      offset += (ALIGN - (offset % ALIGN)) % ALIGN; // the gap reads back as zeros
      for (let done = 0; done < raw.length; ) done += writeSync(fd, raw, done, Math.min(raw.length - done, WRITE_MAX), offset + done);
      const entry = { ...t, rawData: undefined, dataLocation: 1, externalData: [{ key: 'location', value: DATA_FILE }, { key: 'offset', value: String(offset) }, { key: 'length', value: String(raw.length) }] };
      offset += raw.length;
      return entry;
    });
  } finally {
    closeSync(fd);
  }
  writeFileSync(join(dir, MODEL_FILE), encodeModel({ ...model, graph: { ...model.graph, initializer } }));
}
