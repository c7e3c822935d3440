/**
 * θ of an fp16 export: each fp16 weight is held as an fp32 master (what perturbation, exact restore and
 * the update act on) and written to fp16 where a session reads it — into feed buffers before a run (full
 * mode, θ as inputs) or into the graph's initializer bytes while a session is made (low-rank mode and
 * `rebuild-session`), which are freed again once onnxruntime holds its own copy.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { MODEL_FILE } from '../onnx/external-data.ts';
import { fromHalf, toHalf } from '../onnx/half.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';
import { DataType, decodeModel, type TensorProto } from '../onnx/proto.ts';
import { isPerturbable } from './perturbable.ts';

/** The fp32 master of an fp16 initializer (exact: every fp16 value is an fp32 value). */
export function fp32Master(t: TensorProto): Float32Array {
  const raw = t.rawData as Uint8Array;
  const aligned = raw.byteOffset % 2 === 0 ? raw : raw.slice();
  const out = new Float32Array(raw.length / 2);
  fromHalf(new Uint16Array(aligned.buffer, aligned.byteOffset, out.length), out, 'fp16');
  return out;
}

export class HalfTheta {
  private readonly inits: Map<string, TensorProto>;
  /** fp16 copies of the masters for feeds (full mode), made on first use and kept. */
  private feedBuffers = new Map<string, Uint16Array>();

  constructor(
    initializers: readonly TensorProto[],
    /** Names of θ's weights stored fp16 in the graph. */
    readonly names: ReadonlySet<string>,
  ) {
    this.inits = new Map(initializers.filter((t) => names.has(t.name)).map((t) => [t.name, t]));
  }

  get size(): number {
    return this.names.size;
  }

  /** Feeds for θ as graph inputs: fp16 weights cast from their masters now, fp32 ones as they are. */
  feeds(weights: readonly NamedTensor[]): Record<string, ort.Tensor> {
    return Object.fromEntries(
      weights.map((w) => {
        if (!this.names.has(w.name)) return [w.name, new ort.Tensor('float32', w.data, w.dims)];
        let buf = this.feedBuffers.get(w.name);
        if (!buf) this.feedBuffers.set(w.name, (buf = new Uint16Array(w.data.length)));
        toHalf(w.data, buf, 'fp16');
        return [w.name, new ort.Tensor('float16', buf, w.dims)];
      }),
    );
  }

  /** Runs `make` with the graph's fp16 initializers written from the masters, and frees them after. */
  async withInitializers<T>(weights: readonly NamedTensor[], make: () => Promise<T>): Promise<T> {
    for (const w of weights) {
      const t = this.inits.get(w.name);
      if (!t) continue;
      const bits = new Uint16Array(w.data.length);
      toHalf(w.data, bits, 'fp16');
      t.rawData = new Uint8Array(bits.buffer);
    }
    try {
      return await make();
    } finally {
      this.dropInitializers();
    }
  }

  /** Frees the graph's fp16 initializer bytes (the loader's, or those written for a session). */
  dropInitializers(): void {
    for (const t of this.inits.values()) t.rawData = new Uint8Array(0);
  }
}

/**
 * What holding an export's fp16 θ as fp32 masters costs, read from its model.onnx (weights not loaded):
 * the masters (4 bytes an element) come on top of the fp16 bytes a session holds (2 an element).
 */
export function halfPrecisionCost(dir: string): { fp16Elements: number; masterMiB: number; fp16MiB: number } {
  const file = join(dir, MODEL_FILE);
  const g = decodeModel(readFileSync(file), file).graph;
  const fp16Elements = g.initializer.filter((t) => t.dataType === DataType.FLOAT16 && isPerturbable(t, g)).reduce((a, t) => a + t.dims.reduce((x, y) => x * y, 1), 0);
  return { fp16Elements, masterMiB: (fp16Elements * 4) / 2 ** 20, fp16MiB: (fp16Elements * 2) / 2 ** 20 };
}
