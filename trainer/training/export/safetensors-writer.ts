/**
 * The safetensors format, written tensor by tensor: an 8-byte little-endian header length, a JSON header
 * (`__metadata__`, then each tensor's dtype, shape and data_offsets, keys sorted, padded with spaces to 8
 * bytes), then every tensor's little-endian bytes in the header's order. Each tensor's bytes are produced
 * as it is written, so the file is never whole in memory.
 */
import { closeSync, openSync, writeSync } from 'node:fs';

export type SafetensorsDtype = 'F32' | 'F16' | 'BF16';

const DTYPE_BYTES: Record<SafetensorsDtype, number> = { F32: 4, F16: 2, BF16: 2 };
/** fs.writeSync takes at most 2^31 − 1 bytes a call. */
const WRITE_MAX = 2 ** 30;

export interface SafetensorsEntry {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  /** The tensor's bytes (shape's product × the dtype's size), produced when written. */
  bytes: () => Uint8Array;
}

export function writeSafetensors(path: string, entries: readonly SafetensorsEntry[], metadata: Record<string, string> = { format: 'pt' }): void {
  const sorted = [...entries].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const [i, e] of sorted.entries()) {
    if (e.name === '__metadata__' || (i > 0 && sorted[i - 1].name === e.name)) throw new Error(`${path}: tensor name "${e.name}" is reserved or given twice`);
    const size = e.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[e.dtype];
    header[e.name] = { dtype: e.dtype, shape: e.shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const head = Buffer.alloc(8 + Buffer.byteLength(json));
  head.writeBigUInt64LE(BigInt(Buffer.byteLength(json)), 0);
  head.write(json, 8, 'utf8');
  const fd = openSync(path, 'w');
  try {
    let at = 0;
    const write = (b: Uint8Array) => {
      for (let done = 0; done < b.length; ) done += writeSync(fd, b, done, Math.min(b.length - done, WRITE_MAX), at + done);
      at += b.length;
    };
    write(head);
    for (const e of sorted) {
      const bytes = e.bytes();
      const [start, end] = (header[e.name] as { data_offsets: [number, number] }).data_offsets;
      if (bytes.length !== end - start) throw new Error(`${path}: tensor "${e.name}" gave ${bytes.length} bytes, its ${e.dtype} shape [${e.shape.join(', ')}] takes ${end - start}`);
      write(bytes);
    }
  } finally {
    closeSync(fd);
  }
}
