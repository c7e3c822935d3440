/**
 * A run's metrics as TensorBoard event files, in its store beside the rows: `runs/<run>/tensorboard/
 * events.out.tfevents.<unix seconds>.<host>`, so `tensorboard --logdir <store>/runs/<run>/tensorboard`
 * (or the s3:// path of a bucket) shows the run. The file is TFRecord-framed Event protos: first
 * `file_version: "brain.Event:2"`, then one event per iteration (step = iteration, the row's scalars) and
 * one per evaluation (step = k, the evaluation's scalars), each scalar a `Summary.Value{tag, simple_value}`.
 *
 * TensorBoard's own writer appends to its file; an object store (S3) cannot append, so this writer keeps the
 * encoded records and rewrites the whole file after each iteration and evaluation (a reader sees the old
 * file or the new one, never part of either). A resumed run starts a file of its own beside the first one;
 * TensorBoard reads every event file of the directory.
 *
 * The encoding follows tensorboard/compat/proto/event.proto and summary.proto: Event { double wall_time = 1;
 * int64 step = 2; oneof what { string file_version = 3; Summary summary = 5; } }, Summary { repeated Value
 * value = 1; }, Value { string tag = 1; oneof value { float simple_value = 2; } }. A TFRecord is uint64
 * length (little-endian), the masked CRC-32C of those 8 bytes, the data, the masked CRC-32C of the data.
 */
import { hostname } from 'node:os';
import protobuf from 'protobufjs';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import type { EvaluationResult, MetricsRow } from '../../../shared/schemas/index.ts';
import { evaluationScalars, rowScalars, type Scalar } from './scalars.ts';
import type { MetricsSink } from './sink.ts';

export const FILE_VERSION = 'brain.Event:2';

/** CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses. */
const CRC32C_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32c(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC32C_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** TFRecord's masked CRC: rotate right by 15 bits and add a constant. */
export function maskedCrc32c(bytes: Uint8Array): number {
  const c = crc32c(bytes);
  return (((c >>> 15) | (c << 17)) + 0xa282ead8) >>> 0;
}

/** One TFRecord frame around `data`. */
export function tfRecord(data: Uint8Array): Uint8Array {
  const out = Buffer.alloc(8 + 4 + data.length + 4);
  out.writeBigUInt64LE(BigInt(data.length), 0);
  out.writeUInt32LE(maskedCrc32c(out.subarray(0, 8)), 8);
  out.set(data, 12);
  out.writeUInt32LE(maskedCrc32c(data), 12 + data.length);
  return out;
}

export interface EventFields {
  /** Seconds since the epoch. */
  wallTime: number;
  step: number;
  fileVersion?: string;
  values?: readonly Scalar[];
}

/** An Event proto's bytes (field numbers from event.proto and summary.proto). */
export function encodeEvent(e: EventFields): Uint8Array {
  const w = protobuf.Writer.create();
  w.uint32((1 << 3) | 1).double(e.wallTime);
  if (e.step !== 0) w.uint32((2 << 3) | 0).int64(e.step);
  if (e.fileVersion !== undefined) w.uint32((3 << 3) | 2).string(e.fileVersion);
  if (e.values) {
    w.uint32((5 << 3) | 2).fork();
    for (const v of e.values) {
      w.uint32((1 << 3) | 2).fork();
      w.uint32((1 << 3) | 2).string(v.tag);
      w.uint32((2 << 3) | 5).float(v.value);
      w.ldelim();
    }
    w.ldelim();
  }
  return w.finish();
}

/** A host name as a file name's part: what TensorBoard's own writer puts there, minus anything unsafe in a key. */
function fileHost(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '') || 'localhost';
}

export interface TensorBoardOptions {
  /** Milliseconds since the epoch (tests pin it). */
  now?: () => number;
  host?: string;
}

export class TensorBoardSink implements MetricsSink {
  readonly name = 'tensorboard';
  /** The event file's store key. */
  readonly key: string;
  private readonly records: Uint8Array[] = [];
  private written = 0;
  private readonly now: () => number;

  constructor(
    private readonly store: ObjectStore,
    run: string,
    o: TensorBoardOptions = {},
  ) {
    this.now = o.now ?? Date.now;
    const started = this.now();
    this.key = `${keys.tensorboard(run)}events.out.tfevents.${Math.floor(started / 1000)}.${fileHost(o.host ?? hostname())}`;
    this.records.push(tfRecord(encodeEvent({ wallTime: started / 1000, step: 0, fileVersion: FILE_VERSION })));
  }

  async iteration(row: MetricsRow): Promise<void> {
    this.records.push(tfRecord(encodeEvent({ wallTime: Date.parse(row.finishedAt) / 1000, step: row.iteration, values: rowScalars(row) })));
    await this.write();
  }

  async evaluation(e: EvaluationResult): Promise<void> {
    this.records.push(tfRecord(encodeEvent({ wallTime: this.now() / 1000, step: e.iteration, values: evaluationScalars(e) })));
    await this.write();
  }

  async close(): Promise<void> {
    if (this.written < this.records.length) await this.write();
  }

  /** The whole file again: an object store has no append (see the top of this file). */
  private async write(): Promise<void> {
    const count = this.records.length;
    await this.store.put(this.key, Buffer.concat(this.records), { contentType: 'application/octet-stream' });
    this.written = count;
  }
}
