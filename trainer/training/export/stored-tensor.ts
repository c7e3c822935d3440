/**
 * θ's fp32 values in the form a file stores them: transposed back where the loader transposed them, and in
 * the file's dtype — fp32 as is, fp16 and bf16 rounded to nearest even (trainer/engine/onnx/half.ts), as the
 * engine's sessions read an fp16 model's masters.
 */
import { toHalf } from '../../engine/onnx/half.ts';

export type StoredType = 'fp32' | 'fp16' | 'bf16';

/** values [rows, cols] → [cols, rows]. */
export function transposed(values: Float32Array, rows: number, cols: number): Float32Array {
  if (values.length !== rows * cols) throw new RangeError(`cannot transpose ${values.length} values as [${rows}, ${cols}]`);
  const out = new Float32Array(values.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = values[r * cols + c];
  return out;
}

/** The bytes of `values` stored as `type` (little-endian, as ONNX raw data and safetensors both are). */
export function storedBytes(values: Float32Array, type: StoredType): Uint8Array {
  if (type === 'fp32') return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const bits = new Uint16Array(values.length);
  toHalf(values, bits, type);
  return new Uint8Array(bits.buffer);
}
