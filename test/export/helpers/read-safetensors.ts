/** A safetensors file read whole (tests only): its header's metadata and each tensor's dtype, shape and bytes. */
import { readFileSync } from 'node:fs';

export interface ReadTensor {
  dtype: string;
  shape: number[];
  bytes: Buffer;
}

export function readSafetensors(path: string): { metadata: Record<string, string>; keys: string[]; tensors: Map<string, ReadTensor> } {
  const file = readFileSync(path);
  const n = Number(file.readBigUInt64LE(0));
  const header = JSON.parse(file.subarray(8, 8 + n).toString('utf8')) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const { __metadata__: metadata, ...rest } = header as Record<string, unknown>;
  const tensors = new Map<string, ReadTensor>();
  for (const [name, t] of Object.entries(rest) as Array<[string, { dtype: string; shape: number[]; data_offsets: [number, number] }]>) {
    tensors.set(name, { dtype: t.dtype, shape: t.shape, bytes: file.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]) });
  }
  return { metadata: metadata as Record<string, string>, keys: Object.keys(rest), tensors };
}
