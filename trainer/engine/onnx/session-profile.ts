/**
 * Bytes that crossed between host and device inside onnxruntime sessions, read from onnxruntime's own
 * session profiling: where a provider has no kernel for a node (the WebGPU provider's int64 and shape ops),
 * onnxruntime inserts MemcpyFromHost / MemcpyToHost nodes, and the profile records each run of one with its
 * `output_size` (the bytes copied). A session on the CPU provider has none, and a profile without them is a
 * measured zero, not an absent figure: `profiles` says how many profiles were read.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface MemcpyBytes {
  /** MemcpyFromHost runs and the bytes they copied to the device. */
  host_to_device_bytes: number;
  host_to_device_runs: number;
  /** MemcpyToHost runs and the bytes they copied to the host. */
  device_to_host_bytes: number;
  device_to_host_runs: number;
  /** Profile files read (each a session's; 0: nothing was measured). */
  profiles: number;
  /** Node runs the profiles recorded, Memcpy or not. */
  node_runs: number;
}

interface ProfileEvent {
  cat?: string;
  name?: string;
  args?: { op_name?: string; output_size?: string | number };
}

export const noMemcpy = (): MemcpyBytes => ({ host_to_device_bytes: 0, host_to_device_runs: 0, device_to_host_bytes: 0, device_to_host_runs: 0, profiles: 0, node_runs: 0 });

/** The Memcpy node runs of one parsed profile (onnxruntime's Chrome-trace JSON: an array of events). */
export function memcpyOfProfile(events: unknown): MemcpyBytes {
  if (!Array.isArray(events)) throw new Error('an onnxruntime profile is a JSON array of events');
  const out = noMemcpy();
  out.profiles = 1;
  for (const e of events as ProfileEvent[]) {
    // each node run is one `<node>_kernel_time` event; its fence events carry no sizes
    if (e?.cat !== 'Node' || !e.name?.endsWith('_kernel_time')) continue;
    out.node_runs++;
    const op = e.args?.op_name;
    if (op !== 'MemcpyFromHost' && op !== 'MemcpyToHost') continue;
    const bytes = Number(e.args?.output_size);
    if (!Number.isFinite(bytes) || bytes < 0) throw new Error(`a ${op} event without its output_size: ${JSON.stringify(e).slice(0, 200)}`);
    if (op === 'MemcpyFromHost') (out.host_to_device_bytes += bytes), out.host_to_device_runs++;
    else (out.device_to_host_bytes += bytes), out.device_to_host_runs++;
  }
  return out;
}

/** The sum of `a` and `b`. */
export function addMemcpy(a: MemcpyBytes, b: MemcpyBytes): MemcpyBytes {
  const out = noMemcpy();
  for (const k of Object.keys(out) as (keyof MemcpyBytes)[]) out[k] = a[k] + b[k];
  return out;
}

/** Every profile (`*.json`) in `dir`, summed; onnxruntime writes one when a profiled session is released. */
export function memcpyInDir(dir: string): MemcpyBytes {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .reduce((sum, f) => addMemcpy(sum, memcpyOfProfile(JSON.parse(readFileSync(join(dir, f), 'utf8')))), noMemcpy());
}

/** A fresh directory for profiles (EngineOptions.profileDir). */
export function profileDir(): string {
  return mkdtempSync(join(tmpdir(), 'esopt-profile-'));
}

let made = 0;

/**
 * Session options that profile into `dir` (nothing when `dir` is absent). Each session gets a prefix of
 * its own: onnxruntime names the file by the prefix and the creation time in milliseconds only.
 */
export function profiling(dir: string | undefined): { enableProfiling?: boolean; profileFilePrefix?: string } {
  return dir ? { enableProfiling: true, profileFilePrefix: join(dir, `session-${process.pid}-${++made}`) } : {};
}
