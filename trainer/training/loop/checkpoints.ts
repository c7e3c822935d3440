/**
 * Full-weight checkpoints and the append-only update log: θ_k = the newest valid checkpoint ≤ k, replayed
 * through the log. A checkpoint is its weights then its meta (with the θ hash); the meta is written last,
 * so a checkpoint without one was never finished, and one whose weights do not hash to the meta's value
 * (torn, truncated, corrupt) is skipped in favour of the one before. Only the newest few are kept.
 */
import type { ParameterSegment } from '../../../shared/es.ts';
import { keys, parseCheckpointIteration } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { writeJson } from '../../../shared/store/json.ts';
import { CheckpointMeta, LogEntry } from '../../../shared/schemas/index.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function paramCount(segments: readonly ParameterSegment[]): number {
  return segments.reduce((a, s) => a + s.data.length, 0);
}

/** Called between the two writes of a checkpoint: the resume tests stop the process there. */
export type BetweenWrites = () => Promise<void> | void;

export async function writeCheckpoint(store: ObjectStore, run: string, iteration: number, segments: readonly ParameterSegment[], between?: BetweenWrites): Promise<CheckpointMeta> {
  const params = paramCount(segments);
  const bytes = new Uint8Array(params * 4);
  let at = 0;
  for (const s of segments) {
    bytes.set(new Uint8Array(s.data.buffer, s.data.byteOffset, s.data.byteLength), at);
    at += s.data.byteLength;
  }
  const weightsKey = keys.checkpointWeights(run, iteration);
  await store.put(weightsKey, bytes, { contentType: 'application/octet-stream' });
  await between?.();
  const meta: CheckpointMeta = {
    run,
    iteration,
    params,
    thetaHash: hashTheta(segments),
    bytes: bytes.byteLength,
    weightsKey,
    createdAt: new Date().toISOString(),
  };
  await writeJson(store, keys.checkpointMeta(run, iteration), meta);
  return meta;
}

/**
 * Deletes every checkpoint but the newest `keep` finished ones, and any unfinished one (weights without a meta)
 * older than those. Meta first: a checkpoint half deleted reads as never finished, which the loader skips.
 * Returns the iterations deleted.
 */
export async function pruneCheckpoints(store: ObjectStore, run: string, keep: number): Promise<number[]> {
  const prefix = keys.checkpoints(run);
  const objects = await store.list(prefix);
  const finished = objects.map(parseCheckpointIteration).filter((k): k is number => k !== null).sort((a, b) => b - a);
  if (finished.length <= keep) return [];
  const oldestKept = finished[keep - 1]!;
  const doomed = new Set(finished.slice(keep));
  for (const key of objects) {
    const k = /\/checkpoints\/(\d{8,})\/weights\.bin$/.exec(key);
    if (k && Number(k[1]) < oldestKept) doomed.add(Number(k[1]));
  }
  const deleted = [...doomed].sort((a, b) => a - b);
  for (const k of deleted) {
    if (objects.includes(keys.checkpointMeta(run, k))) await store.delete(keys.checkpointMeta(run, k));
    if (objects.includes(keys.checkpointWeights(run, k))) await store.delete(keys.checkpointWeights(run, k));
  }
  return deleted;
}

export interface LoadedCheckpoint {
  meta: CheckpointMeta;
  /** Checkpoints newer than this one that failed verification, with the reason. */
  skipped: Array<{ iteration: number; reason: string }>;
}

/**
 * Copies the newest verified checkpoint into `segments` (same layout). Null when none verifies; θ is
 * untouched unless one does.
 */
export async function loadLatestCheckpoint(store: ObjectStore, run: string, segments: readonly ParameterSegment[], atMost = Infinity): Promise<LoadedCheckpoint | null> {
  const iterations = (await store.list(keys.checkpoints(run)))
    .map(parseCheckpointIteration)
    .filter((k): k is number => k !== null && k <= atMost)
    .sort((a, b) => b - a);
  const skipped: LoadedCheckpoint['skipped'] = [];
  const params = paramCount(segments);
  for (const k of iterations) {
    const reason = await (async (): Promise<string | CheckpointMeta> => {
      const metaBody = await store.get(keys.checkpointMeta(run, k));
      if (!metaBody) return 'meta.json vanished';
      let metaJson: unknown;
      try {
        metaJson = JSON.parse(decoder.decode(metaBody));
      } catch {
        return 'meta.json is not JSON';
      }
      const meta = CheckpointMeta.safeParse(metaJson);
      if (!meta.success) return `meta.json: ${meta.error.issues[0]?.message}`;
      if (meta.data.params !== params) return `has ${meta.data.params} parameters, the model ${params}`;
      const weights = await store.get(meta.data.weightsKey);
      if (!weights) return 'weights.bin is missing';
      if (weights.byteLength !== params * 4) return `weights.bin has ${weights.byteLength} bytes, expected ${params * 4}`;
      // Copy first so the floats are aligned, then check the hash before θ is touched.
      const floats = new Float32Array(weights.slice().buffer);
      const hash = hashTheta([{ data: floats }]);
      if (hash !== meta.data.thetaHash) return `weights hash ${hash} ≠ meta ${meta.data.thetaHash} (torn or corrupt)`;
      let at = 0;
      for (const s of segments) {
        s.data.set(floats.subarray(at, at + s.data.length));
        at += s.data.length;
      }
      return meta.data;
    })();
    if (typeof reason !== 'string') return { meta: reason, skipped };
    skipped.push({ iteration: k, reason });
  }
  return null;
}

/** The log, one entry per committed update, in iteration order. */
export async function readLog(store: ObjectStore, run: string): Promise<LogEntry[]> {
  const body = await store.get(keys.log(run));
  if (!body) return [];
  return decoder
    .decode(body)
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, i) => {
      const parsed = LogEntry.safeParse(JSON.parse(line));
      if (!parsed.success) throw new Error(`${keys.log(run)} line ${i + 1}: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
      return parsed.data;
    });
}

/**
 * Appends the entry unless the log already has its iteration (idempotent, so a resumed run can re-append
 * safely). The object is rewritten whole: stores replace objects atomically, so the log is never torn.
 */
export async function appendLog(store: ObjectStore, run: string, entry: LogEntry): Promise<void> {
  const log = await readLog(store, run);
  if (log.some((e) => e.iteration === entry.iteration)) return;
  const last = log.at(-1);
  if (last && last.iteration !== entry.iteration - 1) throw new Error(`log ends at iteration ${last.iteration}; cannot append iteration ${entry.iteration}`);
  const text = [...log, entry].map((e) => JSON.stringify(e)).join('\n');
  await store.put(keys.log(run), encoder.encode(`${text}\n`), { contentType: 'application/x-ndjson' });
}
