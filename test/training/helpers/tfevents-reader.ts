/**
 * A TensorBoard event-file reader written apart from the writer (trainer/training/metrics/tensorboard.ts)
 * and sharing none of its code: TFRecord frames checked with a bitwise CRC-32C of its own, and a hand-rolled
 * protobuf decoder (varints, fixed32/fixed64, length-delimited) for tensorflow's Event and Summary, field
 * numbers as event.proto and summary.proto give them. A frame whose masked CRC does not match throws.
 */

export interface DecodedValue {
  tag: string;
  simpleValue: number | undefined;
}

export interface DecodedEvent {
  wallTime: number;
  step: number;
  fileVersion?: string;
  values?: DecodedValue[];
}

/** CRC-32C bit by bit (reflected Castagnoli polynomial), no table: deliberately unlike the writer's. */
export function crc32cBitwise(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const b of bytes) {
    crc ^= b;
    for (let i = 0; i < 8; i++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

function masked(bytes: Uint8Array): number {
  const c = crc32cBitwise(bytes);
  const rotated = ((c >>> 15) | ((c << 17) >>> 0)) >>> 0;
  return (rotated + 0xa282ead8) % 2 ** 32;
}

/** The data of each TFRecord frame, every CRC checked. */
export function readFrames(file: Uint8Array): Uint8Array[] {
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const frames: Uint8Array[] = [];
  let p = 0;
  while (p < file.length) {
    if (p + 12 > file.length) throw new Error(`truncated frame header at ${p}`);
    const lengthBytes = file.subarray(p, p + 8);
    const length = Number(view.getBigUint64(p, true));
    if (view.getUint32(p + 8, true) !== masked(lengthBytes)) throw new Error(`length CRC mismatch at ${p}`);
    const start = p + 12;
    if (start + length + 4 > file.length) throw new Error(`truncated frame at ${p}`);
    const data = file.subarray(start, start + length);
    if (view.getUint32(start + length, true) !== masked(data)) throw new Error(`data CRC mismatch at ${p}`);
    frames.push(data);
    p = start + length + 4;
  }
  return frames;
}

type Field = { no: number; wire: 0; value: bigint } | { no: number; wire: 1 | 5 | 2; value: Uint8Array };

function fields(buf: Uint8Array): Field[] {
  const out: Field[] = [];
  let p = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (p >= buf.length) throw new Error('truncated varint');
      const b = buf[p++];
      result |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return result;
      shift += 7n;
    }
  };
  while (p < buf.length) {
    const key = Number(varint());
    const no = key >>> 3;
    const wire = key & 7;
    if (wire === 0) out.push({ no, wire, value: varint() });
    else if (wire === 1) out.push({ no, wire, value: buf.subarray(p, (p += 8)) });
    else if (wire === 5) out.push({ no, wire, value: buf.subarray(p, (p += 4)) });
    else if (wire === 2) {
      const n = Number(varint());
      out.push({ no, wire, value: buf.subarray(p, (p += n)) });
    } else throw new Error(`unexpected wire type ${wire}`);
  }
  return out;
}

const dv = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

function decodeValue(buf: Uint8Array): DecodedValue {
  let tag = '';
  let simpleValue: number | undefined;
  for (const f of fields(buf)) {
    if (f.no === 1 && f.wire === 2) tag = text(f.value);
    else if (f.no === 2 && f.wire === 5) simpleValue = dv(f.value).getFloat32(0, true);
  }
  return { tag, simpleValue };
}

/** Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5 } */
export function decodeEvent(buf: Uint8Array): DecodedEvent {
  const e: DecodedEvent = { wallTime: 0, step: 0 };
  for (const f of fields(buf)) {
    if (f.no === 1 && f.wire === 1) e.wallTime = dv(f.value).getFloat64(0, true);
    else if (f.no === 2 && f.wire === 0) e.step = Number(BigInt.asIntN(64, f.value));
    else if (f.no === 3 && f.wire === 2) e.fileVersion = text(f.value);
    else if (f.no === 5 && f.wire === 2) {
      // Summary { repeated Value value = 1 }
      e.values = fields(f.value).filter((v) => v.no === 1 && v.wire === 2).map((v) => decodeValue(v.value as Uint8Array));
    }
  }
  return e;
}

export function readEvents(file: Uint8Array): DecodedEvent[] {
  return readFrames(file).map(decodeEvent);
}
