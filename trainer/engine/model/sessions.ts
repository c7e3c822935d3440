/**
 * onnxruntime sessions for an engine's graphs. A graph whose initializers reach INLINE_SESSION_LIMIT bytes
 * goes to onnxruntime as files in a scratch directory (model.onnx + external data), because protobuf caps
 * one message at 2 GiB; below it the graph is encoded in memory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import type { EngineOptions } from '../engine.ts';
import { MODEL_FILE, writeOnnxWithExternalData } from '../onnx/external-data.ts';
import { encodeModel, type ModelProto } from '../onnx/proto.ts';
import { profiling } from '../onnx/session-profile.ts';

/** Initializer bytes from which a session's graph goes through files: half protobuf's cap, so no graph near it is encoded whole (docs/BENCHMARKS.md). */
export const INLINE_SESSION_LIMIT = 2 ** 30;

export type SessionSettings = Pick<EngineOptions, 'executionProvider' | 'threads' | 'kvOnDevice' | 'profileDir'>;

/** Whether a decoder's sessions return `present.*` on the device (the webgpu route, unless turned off). */
export function keepsKvOnDevice(options: SessionSettings): boolean {
  return options.executionProvider === 'webgpu' && options.kvOnDevice !== false;
}

/** Each `present.*` output of `model` left on the device where the caches stay there (device-tensors.ts); others come to the host. */
function outputLocations(model: ModelProto, options: SessionSettings): ort.InferenceSession.SessionOptions {
  if (!keepsKvOnDevice(options)) return {};
  const present = model.graph.output.filter((o) => o.name.startsWith('present.'));
  return present.length === 0 ? {} : { preferredOutputLocation: Object.fromEntries(present.map((o) => [o.name, 'gpu-buffer' as const])) };
}

/** onnxruntime's options for every session of an engine. */
export function sessionOptionsFor(options: SessionSettings): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: [options.executionProvider ?? 'cpu'],
    graphOptimizationLevel: 'all',
    ...(options.threads ? { intraOpNumThreads: options.threads } : {}),
    ...profiling(options.profileDir),
  };
}

/**
 * An onnxruntime session for `model`. Past `inlineLimit` bytes of initializers the graph is written to a
 * scratch directory under ESOPT_SESSION_DIR (default the system's temporary directory; it needs room for θ
 * once), which is removed once onnxruntime has read it. `handOver` is called once the session no longer needs
 * the graph's bytes in memory (written to the scratch directory, or the in-memory session made): a caller that
 * gives W to the session detaches its copies there (weight-handover.ts).
 */
export async function createSession(model: ModelProto, options: SessionSettings, what: string, inlineLimit = INLINE_SESSION_LIMIT, handOver?: () => void): Promise<ort.InferenceSession> {
  const provider = options.executionProvider ?? 'cpu';
  const sessionOptions = { ...sessionOptionsFor(options), ...outputLocations(model, options) };
  const create = async (start: () => Promise<ort.InferenceSession>) => {
    try {
      return await start();
    } catch (err) {
      const message = (err as Error).message;
      // an op onnxruntime does not know or has no kernel for: say what runs
      const op = /not a registered function\/op|Could not find an implementation|No Op registered/.test(message)
        ? ` (esopt runs the ops onnxruntime-node ${ort.env.versions.common} implements for the ${provider} provider: ONNX-domain ops and com.microsoft contrib ops over float32 or float16 tensors; re-export with optimum's defaults, or replace the op)`
        : '';
      throw new Error(`${what}: onnxruntime could not create a session with the ${provider} execution provider: ${message}${op}`);
    }
  };
  const initializerBytes = model.graph.initializer.reduce((a, t) => a + (t.rawData?.length ?? 0), 0);
  if (initializerBytes < inlineLimit) {
    const session = await create(() => ort.InferenceSession.create(encodeModel(model), sessionOptions));
    handOver?.();
    return session;
  }
  const scratchError = (err: unknown) => new Error(`${what}: could not write the session's graph to a scratch directory (ESOPT_SESSION_DIR): ${(err as Error).message}`);
  let dir: string;
  try {
    dir = mkdtempSync(join(process.env.ESOPT_SESSION_DIR || tmpdir(), 'esopt-session-'));
  } catch (err) {
    throw scratchError(err);
  }
  try {
    try {
      writeOnnxWithExternalData(dir, model);
    } catch (err) {
      throw scratchError(err);
    }
    // the graph's bytes are on disk: what onnxruntime reads from here is the file, never this process's copy
    handOver?.();
    return await create(() => ort.InferenceSession.create(join(dir, MODEL_FILE), sessionOptions));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
