/**
 * Handing a model's weights over to onnxruntime: once a session holds W (prepacked from a file it read
 * itself), the loader's copies in this process are detached, so W is held once — by the session — and the
 * process's peak never holds both. Used where the engine never reads W again (LoRA mode: W is fixed).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { LoadedModel } from './model-dir.ts';

/** Buffers under this size are left alone: the handover is about θ-sized memory, not the small constants. */
const HANDOVER_FROM_BYTES = 1 << 20;

let collect: (() => void) | null = null;

/**
 * Detaches every large buffer behind `model`'s weights and graph initializers (their views read as empty
 * afterwards; names and dims stay), and collects them now rather than at V8's next full GC, which could come
 * after onnxruntime has made its own copy. Returns the bytes detached.
 */
export function handOverWeights(model: LoadedModel): number {
  const buffers = new Set<ArrayBuffer>();
  const add = (view: ArrayBufferView | undefined) => {
    if (view && view.byteLength >= HANDOVER_FROM_BYTES && view.buffer instanceof ArrayBuffer) buffers.add(view.buffer);
  };
  for (const w of model.weights) add(w.data);
  for (const t of model.graph.graph.initializer) add(t.rawData);
  let bytes = 0;
  for (const b of buffers) {
    const size = b.byteLength;
    // a transfer detaches every view of the buffer; the clone is dropped at once
    structuredClone(b, { transfer: [b] });
    bytes += size;
  }
  if (bytes > 0) {
    if (!collect) {
      setFlagsFromString('--expose-gc');
      collect = runInNewContext('gc') as () => void;
    }
    collect();
  }
  return bytes;
}
