/**
 * Bytes that cross between host and device at the engine's own calls on a device's sessions, counted where
 * the call is made: a feed on the host ('cpu' location) goes up, an output that comes back on the host came
 * down, and a gpu-buffer tensor in or out moves nothing. These are the session runs the code makes to move
 * or make device tensors (device-tensors.ts, members/full-device.ts). Copies onnxruntime makes inside a
 * session are its Memcpy nodes (onnx/session-profile.ts), counted apart.
 */
import type * as ort from 'onnxruntime-node';

export interface Crossings {
  hostToDevice: number;
  deviceToHost: number;
  /** Session runs counted. */
  runs: number;
}

export const noCrossings = (): Crossings => ({ hostToDevice: 0, deviceToHost: 0, runs: 0 });

/** The bytes of the host-located tensors among `tensors`. */
export function hostBytes(tensors: Iterable<ort.Tensor>): number {
  let bytes = 0;
  for (const t of tensors) if (t.location === 'cpu' || t.location === 'cpu-pinned') bytes += (t.data as ArrayBufferView).byteLength;
  return bytes;
}

/** `session.run(feeds)`, adding to `into` the host feeds' bytes (up) and the host outputs' bytes (down). */
export async function countedRun(session: ort.InferenceSession, feeds: Record<string, ort.Tensor>, into: Crossings): Promise<ort.InferenceSession.OnnxValueMapType> {
  const out = await session.run(feeds);
  into.hostToDevice += hostBytes(Object.values(feeds));
  into.deviceToHost += hostBytes(Object.values(out) as ort.Tensor[]);
  into.runs++;
  return out;
}
