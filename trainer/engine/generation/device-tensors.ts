/**
 * The decode loop's tensors kept on a WebGPU device for a batch: the decoder's `present.*` come back as
 * gpu-buffer tensors (session option `preferredOutputLocation`) and are fed as the next step's
 * `past_key_values.*`, and the batch's extra inputs (θ as inputs, low-rank factors) are uploaded once, so
 * a step moves only its ids, positions and mask in and its logits out. onnxruntime-node 1.30 has no
 * working call that moves a gpu-buffer tensor's data (`getData()` on one aborts the process;
 * `Tensor.fromGpuBuffer` needs a WebGPU device object Node never sees), so every move is a tiny session on
 * the same device: Identity with its outputs there (an upload), and a Gather on the batch axis whose
 * output stays there (rows dropped) or comes to the host (the K/V a row keeps for the prefix cache). Every
 * gpu-buffer tensor the loop receives is counted here until disposed, so a leak shows as `live` > 0.
 */
import * as ort from 'onnxruntime-node';
import { GraphBuilder } from '../onnx/graph-builder.ts';
import { DataType, encodeModel } from '../onnx/proto.ts';
import { profiling } from '../onnx/session-profile.ts';
import { countedRun, noCrossings, type Crossings } from './crossings.ts';

/** What the gather sessions need of the decoder's caches (kv-layout.ts is where the decode loop keeps them). */
export interface CacheShape {
  layers: number;
  kvType?: 'float32' | 'float16';
  /** Where the tiny sessions write onnxruntime profiles (EngineOptions.profileDir); absent: not profiled. */
  profileDir?: string;
}

/** past_key_values.{l}.{key,value}, in the order the gather graph takes them. */
export function pastNames(layers: number): string[] {
  return Array.from({ length: layers }, (_, l) => [`past_key_values.${l}.key`, `past_key_values.${l}.value`]).flat();
}

/** One Gather on axis 0 per cache, all sharing the row indices `rows` [n]. */
function gatherGraph(layout: CacheShape) {
  const g = new GraphBuilder();
  const type = layout.kvType === 'float16' ? DataType.FLOAT16 : DataType.FLOAT;
  const rows = g.input('rows', DataType.INT64, ['n']);
  pastNames(layout.layers).forEach((name, i) => {
    g.input(name, type, ['batch', 'heads', 'past', 'head_dim']);
    g.nameOutput(g.op1('Gather', [name, rows], { axis: 0 }), `rows.${i}`);
    g.output(`rows.${i}`, type, ['n', 'heads', 'past', 'head_dim']);
  });
  return encodeModel(g.model('kv-gather'));
}

const ONNX_TYPE: Partial<Record<ort.Tensor.Type, number>> = { float32: DataType.FLOAT, float16: DataType.FLOAT16, int64: DataType.INT64, int32: DataType.INT32, uint32: DataType.UINT32 };

/** Identity from each named input to `up.{i}`, any shape of the input's rank. */
function uploadGraph(feeds: ReadonlyArray<[string, ort.Tensor]>) {
  const g = new GraphBuilder();
  feeds.forEach(([name, t], i) => {
    const type = ONNX_TYPE[t.type];
    if (type === undefined) throw new Error(`cannot keep ${name} (${t.type}) on the device`);
    const dims = t.dims.map((_, d) => `d${i}_${d}`);
    g.input(name, type, dims);
    g.nameOutput(g.op1('Identity', [name]), `up.${i}`);
    g.output(`up.${i}`, type, dims);
  });
  return encodeModel(g.model('upload'));
}

export class DeviceTensors {
  private readonly tracked = new Set<ort.Tensor>();
  /** Upload sessions by the names, types and ranks they take. */
  private readonly uploaders = new Map<string, Promise<ort.InferenceSession>>();

  /** The Gather sessions, made on first use: outputs on the device, and the same Gather with outputs on the host. */
  private gathers: Promise<{ onDevice: ort.InferenceSession; toHost: ort.InferenceSession }> | null = null;

  /** Bytes this object's session runs fed from the host and fetched to it (uploads, row indices, downloads). */
  readonly crossed: Crossings = noCrossings();

  private constructor(readonly layout: CacheShape) {}

  static async create(layout: CacheShape): Promise<DeviceTensors> {
    return new DeviceTensors(layout);
  }

  private gatherSessions() {
    this.gathers ??= (async () => {
      const graph = gatherGraph(this.layout);
      const outputs = Object.fromEntries(pastNames(this.layout.layers).map((_, i) => [`rows.${i}`, 'gpu-buffer' as const]));
      const onDevice = await ort.InferenceSession.create(graph, { executionProviders: ['webgpu'], preferredOutputLocation: outputs, ...profiling(this.layout.profileDir) });
      const toHost = await ort.InferenceSession.create(graph, { executionProviders: ['webgpu'], ...profiling(this.layout.profileDir) });
      return { onDevice, toHost };
    })();
    return this.gathers;
  }

  /** Copies of `feeds` on the device (host tensors in; `feeds` themselves are left as they are). */
  async upload(feeds: Record<string, ort.Tensor>): Promise<Record<string, ort.Tensor>> {
    const entries = Object.entries(feeds).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    if (entries.length === 0) return {};
    const key = entries.map(([n, t]) => `${n}:${t.type}:${t.dims.length}`).join('|');
    let session = this.uploaders.get(key);
    if (!session) {
      const locations = Object.fromEntries(entries.map((_, i) => [`up.${i}`, 'gpu-buffer' as const]));
      session = ort.InferenceSession.create(uploadGraph(entries), { executionProviders: ['webgpu'], preferredOutputLocation: locations, ...profiling(this.layout.profileDir) });
      this.uploaders.set(key, session);
    }
    const out = await countedRun(await session, Object.fromEntries(entries), this.crossed);
    const uploaded = Object.fromEntries(entries.map(([name], i) => [name, out[`up.${i}`]]));
    this.adopt(Object.values(uploaded));
    return uploaded;
  }

  /** gpu-buffer tensors received and not yet disposed. */
  get live(): number {
    return this.tracked.size;
  }

  /** Counts the gpu-buffer tensors among `tensors` until `dispose` releases them. */
  adopt(tensors: Iterable<ort.Tensor>): void {
    for (const t of tensors) if (t.location === 'gpu-buffer') this.tracked.add(t);
  }

  /** Releases the device memory of the gpu-buffer tensors among `tensors` (host tensors are left alone). */
  dispose(tensors: Iterable<ort.Tensor>): void {
    for (const t of tensors) {
      if (t.location !== 'gpu-buffer') continue;
      t.dispose();
      this.tracked.delete(t);
    }
  }

  /** Rows `rows` of `past`, as a new past on the device (`past` itself is left as it is). */
  async gather(past: Record<string, ort.Tensor>, rows: readonly number[]): Promise<Record<string, ort.Tensor>> {
    const out = await countedRun((await this.gatherSessions()).onDevice, this.feeds(past, rows), this.crossed);
    const gathered = Object.fromEntries(pastNames(this.layout.layers).map((name, i) => [name, out[`rows.${i}`]]));
    this.adopt(Object.values(gathered));
    return gathered;
  }

  /** Rows `rows` of `past` on the host, as [rows.length, heads, past, head_dim] tensors. */
  async download(past: Record<string, ort.Tensor>, rows: readonly number[]): Promise<Record<string, ort.Tensor>> {
    const out = await countedRun((await this.gatherSessions()).toHost, this.feeds(past, rows), this.crossed);
    return Object.fromEntries(pastNames(this.layout.layers).map((name, i) => [name, out[`rows.${i}`]]));
  }

  private feeds(past: Record<string, ort.Tensor>, rows: readonly number[]): Record<string, ort.Tensor> {
    const feeds: Record<string, ort.Tensor> = { rows: new ort.Tensor('int64', BigInt64Array.from(rows, BigInt), [rows.length]) };
    for (const name of pastNames(this.layout.layers)) {
      if (!past[name]) throw new Error(`the device KV gather needs ${name}`);
      feeds[name] = past[name];
    }
    return feeds;
  }

  async release(): Promise<void> {
    this.dispose([...this.tracked]);
    const gathers = await this.gathers?.catch(() => null);
    await gathers?.onDevice.release();
    await gathers?.toHost.release();
    for (const s of this.uploaders.values()) await (await s).release();
  }
}
