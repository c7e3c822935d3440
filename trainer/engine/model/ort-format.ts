/**
 * θ inside onnxruntime's own ORT-format model bytes, for full mode's `rebuild-session` weights.
 *
 * A session made from ORT-format bytes with `session.use_ort_model_bytes_directly` and
 * `session.use_ort_model_bytes_for_initializers` reads its initializers from those bytes in place, so the
 * bytes can *be* θ: perturbing θ edits the model, and a member's session is made from them with nothing to
 * encode, which is most of what a session from the graph costs (docs/BENCHMARKS.md). Its
 * MatMul weights are prepacked at creation, so it decodes at initializer speed; its other initializers
 * (norms, the embedding) are read from the bytes at every run, so a session may only run while θ is what
 * it was made from — the engine releases a member's session before restoring θ, releases the base session
 * while a member's serves, and makes the base session again when θ's own rows come.
 *
 * The bytes come from onnxruntime itself: it saves the graph as an ORT-format model. Where each weight lies
 * in them is found by saving the graph with a marker in place of each weight — every element encodes the
 * weight's index, so no marker can match inside another — and finding each marker exactly once, 4-byte
 * aligned; θ is then copied over it. A weight that is not there verbatim, or whose marker is ambiguous, is
 * an error naming it, never a guess.
 *
 * The ORT format is a flatbuffer, capped at 2 GiB (`ORT_FORMAT_LIMIT`): bigger models keep the
 * encode-and-create path.
 */
import { closeSync, fstatSync, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { MODEL_FILE, writeOnnxWithExternalData } from '../onnx/external-data.ts';
import { bytesOf, encodeModel, type ModelProto } from '../onnx/proto.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';
import type { ExecutionProvider } from '../../../shared/execution-provider.ts';

/** θ's bytes up to which it can live in an ORT-format model: 2 GiB less room for the graph itself. */
export const ORT_FORMAT_LIMIT = 2 ** 31 - 2 ** 26;

/** Weights up to this many can be told apart by the index in their markers' high bits. */
const MAX_MARKED_WEIGHTS = 2 ** 10;

export interface OrtFormatModel {
  /** The ORT-format model; θ's elements are inside it. */
  bytes: Uint8Array;
  /** views[i] is weight i's data inside `bytes`. */
  views: Float32Array[];
}

/**
 * Weight t's marker: element i is (t << 22 | i mod 2^22) times an odd constant, as bits. The product is a
 * bijection of 32-bit words, so no element of one weight's marker equals one of another's, and it keeps
 * short markers from looking like the small integers a flatbuffer's own fields hold.
 */
function marker(t: number, length: number): Float32Array {
  const bits = new Uint32Array(length);
  for (let i = 0; i < length; i++) bits[i] = Math.imul((t << 22) | (i & 0x3fffff), 0x9e3779b1) >>> 0;
  return new Float32Array(bits.buffer);
}

/** A file read into a buffer of its own (4-byte aligned at 0, for the views; no second copy of θ). */
function readWhole(file: string): Uint8Array {
  const fd = openSync(file, 'r');
  try {
    const out = new Uint8Array(fstatSync(fd).size);
    for (let at = 0; at < out.length; ) {
      const n = readSync(fd, out, at, Math.min(out.length - at, 2 ** 30), at);
      if (n === 0) throw new Error(`${file} ended after ${at} of ${out.length} bytes`);
      at += n;
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

/**
 * `graph` saved by onnxruntime as an ORT-format model, with θ (`weights`, each an initializer of the graph)
 * copied into it. The save goes through a scratch directory (ESOPT_SESSION_DIR, default the system's
 * temporary directory), removed before this returns.
 */
export async function ortFormatModel(
  graph: ModelProto,
  weights: readonly NamedTensor[],
  sessionOptions: ort.InferenceSession.SessionOptions,
  what: string,
  /** From this many bytes of initializers the marked graph reaches onnxruntime as files (sessions.ts's INLINE_SESSION_LIMIT). */
  inlineLimit: number,
): Promise<OrtFormatModel> {
  const bytes = weights.reduce((a, w) => a + w.data.byteLength, 0);
  if (bytes > ORT_FORMAT_LIMIT) throw new Error(`${what}: θ is ${bytes} bytes, more than an ORT-format model holds (${ORT_FORMAT_LIMIT})`);
  if (weights.length > MAX_MARKED_WEIGHTS) throw new Error(`${what}: ${weights.length} weights, more than the ORT-format layout can place (${MAX_MARKED_WEIGHTS})`);
  const index = new Map(weights.map((w, i) => [w.name, i]));
  const markers = weights.map((w, i) => marker(i, w.data.length));
  const marked: ModelProto = {
    ...graph,
    graph: { ...graph.graph, initializer: graph.graph.initializer.map((t) => (index.has(t.name) ? { ...t, rawData: bytesOf(markers[index.get(t.name)!]) } : t)) },
  };
  let dir: string;
  try {
    dir = mkdtempSync(join(process.env.ESOPT_SESSION_DIR || tmpdir(), 'esopt-ort-'));
  } catch (err) {
    throw new Error(`${what}: could not make a scratch directory for the ORT-format model (ESOPT_SESSION_DIR): ${(err as Error).message}`);
  }
  let owned: Uint8Array;
  try {
    const file = join(dir, 'model.ort');
    // Saved unoptimized, the graph is exactly ours: an optimizer pass here could fold a weight into a
    // derived constant (a transposed copy, say) that later edits of θ would not reach. The sessions made
    // from the bytes optimize as usual, from θ as it is when each is made, on the engine's provider; the
    // save itself needs none but the CPU.
    const saving = { ...sessionOptions, executionProviders: ['cpu'], graphOptimizationLevel: 'disabled' as const, optimizedModelFilePath: file, extra: { session: { save_model_format: 'ORT' } } };
    const initializerBytes = marked.graph.initializer.reduce((a, t) => a + (t.rawData?.length ?? 0), 0);
    try {
      // Like createSession: a big graph goes to onnxruntime as model.onnx + external data, not one protobuf.
      const saver = initializerBytes < inlineLimit
        ? await ort.InferenceSession.create(encodeModel(marked), saving)
        : await ort.InferenceSession.create((writeOnnxWithExternalData(dir, marked), join(dir, MODEL_FILE)), saving);
      await saver.release();
      owned = readWhole(file);
    } catch (err) {
      throw new Error(`${what}: onnxruntime could not save the model in the ORT format: ${(err as Error).message}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const haystack = Buffer.from(owned.buffer, owned.byteOffset, owned.byteLength);
  const views = weights.map((w, i) => {
    const needle = Buffer.from(markers[i].buffer);
    const at = haystack.indexOf(needle);
    if (at < 0 || haystack.indexOf(needle, at + 1) >= 0 || at % 4 !== 0) {
      const why = at < 0 ? 'is not in it verbatim' : at % 4 !== 0 ? 'is not 4-byte aligned in it' : 'occurs twice in it';
      throw new Error(`${what}: weight ${w.name} ${why} (the ORT-format save changed it)`);
    }
    const view = new Float32Array(owned.buffer, at, w.data.length);
    view.set(w.data);
    return view;
  });
  return { bytes: owned, views };
}

/**
 * Whether sessions from ORT-format bytes run on `provider`: onnxruntime-node 1.30's WebGPU provider makes
 * one but fails its first run (a Gather's input is not on a WebGPU buffer), with or without the
 * in-place options, so a webgpu engine builds member sessions by encoding the graph.
 */
export const ortFormatRuns = (provider: ExecutionProvider): boolean => provider !== 'webgpu';

/** A session whose initializers are read from `model.bytes` in place (see above). */
export async function createOrtFormatSession(model: OrtFormatModel, sessionOptions: ort.InferenceSession.SessionOptions, what: string): Promise<ort.InferenceSession> {
  try {
    return await ort.InferenceSession.create(model.bytes, {
      ...sessionOptions,
      extra: { session: { use_ort_model_bytes_directly: '1', use_ort_model_bytes_for_initializers: '1' } },
    });
  } catch (err) {
    throw new Error(`${what}: onnxruntime could not create a session from the ORT-format model: ${(err as Error).message}`);
  }
}
