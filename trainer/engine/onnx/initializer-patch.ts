/**
 * An ONNX file rewritten with new data for some initializers and every other byte as the original's: the
 * protobuf is walked at the wire level (model → graph → node → attribute → subgraph), so fields this
 * project's onnx.proto leaves out (functions, training info, sparse tensors, newer fields) pass through
 * untouched. An inline initializer gets a new raw_data field; an external one keeps its message and its
 * bytes are written over, at its offset, in a copy of its data file. Data is produced and written one
 * tensor at a time, never all of it at once.
 */
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { DataType, DataTypeName } from './proto.ts';

/** An initializer as its message declares it (its data not read). */
export interface InitializerHeader {
  name: string;
  dims: number[];
  dataType: number;
  /** Where its bytes live when stored outside the model file. */
  external?: { location: string; offset: number; length: number };
}

/** The new bytes of an initializer (its original byte length, in its dtype and dims), or undefined to keep it. */
export type InitializerData = (t: InitializerHeader) => (() => Uint8Array) | undefined;

const ELEMENT_BYTES: Record<number, number> = { [DataType.FLOAT]: 4, [DataType.FLOAT16]: 2, [DataType.BFLOAT16]: 2, [DataType.DOUBLE]: 8, [DataType.INT64]: 8, [DataType.INT32]: 4 };
/** fs.writeSync takes at most 2^31 − 1 bytes a call. */
const WRITE_MAX = 2 ** 30;

/** A message's new bytes: verbatim slices, data written when it is emitted, and nested messages. */
type Piece = Uint8Array | { size: number; produce: () => Uint8Array } | { key: Uint8Array; pieces: Piece[] };

interface Field {
  field: number;
  wire: number;
  /** The whole field, key included. */
  start: number;
  end: number;
  /** The value (wire type 2: the bytes after the length). */
  valueStart: number;
}

function varint(buf: Uint8Array, at: number): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (let i = at; i < buf.length && i < at + 10; i++) {
    value += (buf[i] & 0x7f) * scale;
    scale *= 128;
    if (!(buf[i] & 0x80)) return { value, next: i + 1 };
  }
  throw new Error(`truncated varint at byte ${at}`);
}

function encodeVarint(v: number): Uint8Array {
  const out: number[] = [];
  while (v >= 128) {
    out.push((v % 128) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Uint8Array.from(out);
}

function* fields(buf: Uint8Array, start: number, end: number): Generator<Field> {
  let at = start;
  while (at < end) {
    const key = varint(buf, at);
    const field = Math.floor(key.value / 8);
    const wire = key.value % 8;
    let valueStart = key.next;
    let next: number;
    if (wire === 0) next = varint(buf, key.next).next;
    else if (wire === 1) next = key.next + 8;
    else if (wire === 5) next = key.next + 4;
    else if (wire === 2) {
      const len = varint(buf, key.next);
      valueStart = len.next;
      next = len.next + len.value;
    } else throw new Error(`unsupported protobuf wire type ${wire} at byte ${at}`);
    if (next > end) throw new Error(`field ${field} at byte ${at} runs past its message`);
    yield { field, wire, start: at, end: next, valueStart };
    at = next;
  }
}

const utf8 = new TextDecoder();

/** The header of a TensorProto message: name, dims, dtype and where external data lives. */
function tensorHeader(buf: Uint8Array, start: number, end: number): InitializerHeader {
  const t: InitializerHeader = { name: '', dims: [], dataType: 0 };
  const entries = new Map<string, string>();
  let location = 0;
  for (const f of fields(buf, start, end)) {
    if (f.field === 1 && f.wire === 0) t.dims.push(varint(buf, f.valueStart).value);
    else if (f.field === 1 && f.wire === 2) {
      for (let at = f.valueStart; at < f.end; ) {
        const d = varint(buf, at);
        t.dims.push(d.value);
        at = d.next;
      }
    }
    else if (f.field === 2 && f.wire === 0) t.dataType = varint(buf, f.valueStart).value;
    else if (f.field === 8 && f.wire === 2) t.name = utf8.decode(buf.subarray(f.valueStart, f.end));
    else if (f.field === 14 && f.wire === 0) location = varint(buf, f.valueStart).value;
    else if (f.field === 13 && f.wire === 2) {
      let key = '';
      let value = '';
      for (const e of fields(buf, f.valueStart, f.end)) {
        if (e.field === 1) key = utf8.decode(buf.subarray(e.valueStart, e.end));
        if (e.field === 2) value = utf8.decode(buf.subarray(e.valueStart, e.end));
      }
      entries.set(key, value);
    }
  }
  if (location === 1) {
    const where = entries.get('location');
    if (!where) throw new Error(`initializer "${t.name}" is external but names no location`);
    const size = ELEMENT_BYTES[t.dataType];
    const fallback = size === undefined ? NaN : size * t.dims.reduce((a, b) => a * b, 1);
    t.external = { location: where, offset: Number(entries.get('offset') ?? 0), length: Number(entries.get('length') ?? fallback) };
  }
  return t;
}

/** Fields of a TensorProto that hold its data inline: float, int32, int64, raw, double, uint64. */
const DATA_FIELDS = new Set([4, 5, 7, 9, 10, 11]);

type Kind = 'model' | 'graph' | 'node' | 'attribute' | 'initializer' | 'tensor';
/** Where the walk descends: (kind, field number) → the kind of the nested message. */
const CHILDREN: Record<Kind, Record<number, Kind>> = {
  model: { 7: 'graph' },
  graph: { 1: 'node', 5: 'initializer' },
  node: { 5: 'attribute' },
  attribute: { 5: 'tensor', 6: 'graph', 10: 'tensor', 11: 'graph' },
  initializer: {},
  tensor: {},
};

interface Walk {
  buf: Uint8Array;
  file: string;
  /** Called for every tensor with external data (initializers and attribute tensors). */
  external: (t: InitializerHeader) => void;
  data: InitializerData;
  /** Writes an external initializer's new bytes into the copy of its data file. */
  writeExternal: (t: InitializerHeader, bytes: Uint8Array) => void;
}

function expectedBytes(t: InitializerHeader, file: string): number {
  const size = ELEMENT_BYTES[t.dataType];
  if (size === undefined) throw new Error(`${file}: initializer "${t.name}" has dtype ${DataTypeName[t.dataType] ?? t.dataType}, which esopt does not write`);
  return size * t.dims.reduce((a, b) => a * b, 1);
}

/** The message's new pieces, or null when nothing in it changed (it is then copied verbatim). */
function walk(w: Walk, kind: Kind, start: number, end: number): Piece[] | null {
  if (kind === 'initializer' || kind === 'tensor') {
    const t = tensorHeader(w.buf, start, end);
    if (t.external) w.external(t);
    const produce = kind === 'initializer' ? w.data(t) : undefined;
    if (!produce) return null;
    const length = t.external?.length ?? expectedBytes(t, w.file);
    const checked = () => {
      const bytes = produce();
      if (bytes.length !== length) throw new Error(`${w.file}: new data for initializer "${t.name}" has ${bytes.length} bytes, the original ${length}`);
      return bytes;
    };
    if (t.external) {
      w.writeExternal(t, checked());
      return null;
    }
    // inline: every field but the data as it was, then raw_data with the new bytes
    const kept = [...fields(w.buf, start, end)].filter((f) => !DATA_FIELDS.has(f.field)).map((f) => w.buf.subarray(f.start, f.end));
    return [...kept, encodeVarint(9 * 8 + 2), encodeVarint(length), { size: length, produce: checked }];
  }
  let changed = false;
  const pieces: Piece[] = [];
  for (const f of fields(w.buf, start, end)) {
    const child = f.wire === 2 ? CHILDREN[kind][f.field] : undefined;
    const inner = child ? walk(w, child, f.valueStart, f.end) : null;
    if (!inner) {
      pieces.push(w.buf.subarray(f.start, f.end));
      continue;
    }
    changed = true;
    pieces.push({ key: encodeVarint(f.field * 8 + 2), pieces: inner });
  }
  return changed ? pieces : null;
}

function sizeOf(p: Piece): number {
  if (p instanceof Uint8Array) return p.length;
  if ('size' in p) return p.size;
  const inner = p.pieces.reduce((a, q) => a + sizeOf(q), 0);
  return p.key.length + encodeVarint(inner).length + inner;
}

function writeAll(fd: number, bytes: Uint8Array, at: number): void {
  for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, Math.min(bytes.length - done, WRITE_MAX), at + done);
}

function emit(fd: number, pieces: Piece[], at: number): number {
  for (const p of pieces) {
    if (p instanceof Uint8Array) {
      writeAll(fd, p, at);
      at += p.length;
    } else if ('size' in p) {
      writeAll(fd, p.produce(), at);
      at += p.size;
    } else {
      const inner = p.pieces.reduce((a, q) => a + sizeOf(q), 0);
      const head = new Uint8Array([...p.key, ...encodeVarint(inner)]);
      writeAll(fd, head, at);
      at = emit(fd, p.pieces, at + head.length);
    }
  }
  return at;
}

/** A location inside `dir`, or an error naming the tensor that points outside it. */
function inside(dir: string, location: string, t: InitializerHeader, file: string): string {
  const path = normalize(join(dir, location));
  if (relative(dir, path).startsWith('..')) throw new Error(`${file}: tensor "${t.name}" points outside the model directory (${location})`);
  return path;
}

/**
 * Writes `outDir/file` as `srcDir/file` with the initializers `data` gives new bytes for (at any depth of
 * subgraphs), and copies of the external data files it references, patched. Returns the data files
 * written (relative to `outDir`).
 */
export function patchInitializers(srcDir: string, file: string, outDir: string, data: InitializerData): { dataFiles: string[] } {
  const src = join(srcDir, file);
  const buf = readFileSync(src);
  const copied = new Map<string, number>();
  const copyData = (t: InitializerHeader) => {
    const location = t.external!.location;
    if (copied.has(location)) return;
    const from = inside(srcDir, location, t, src);
    if (!existsSync(from)) throw new Error(`${from}: missing external data file (needed by "${t.name}")`);
    if (t.external!.offset + t.external!.length > statSync(from).size) throw new Error(`${from}: tensor "${t.name}" reads past the end of the file`);
    const to = inside(outDir, location, t, src);
    mkdirSync(dirname(to), { recursive: true });
    copyFileSync(from, to);
    copied.set(location, openSync(to, 'r+'));
  };
  try {
    const pieces = walk(
      {
        buf,
        file: src,
        external: copyData,
        data,
        writeExternal: (t, bytes) => writeAll(copied.get(t.external!.location)!, bytes, t.external!.offset),
      },
      'model',
      0,
      buf.length,
    );
    const fd = openSync(join(outDir, file), 'w');
    try {
      emit(fd, pieces ?? [buf], 0);
    } finally {
      closeSync(fd);
    }
  } finally {
    for (const fd of copied.values()) closeSync(fd);
  }
  return { dataFiles: [...copied.keys()] };
}
