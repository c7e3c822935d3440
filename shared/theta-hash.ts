import { createHash } from 'node:crypto';

/** A short content hash of θ's float32 bytes, in segment order: names a weight state in manifests and checkpoints. */
export function hashTheta(tensors: ReadonlyArray<{ data: Float32Array }>): string {
  const h = createHash('sha256');
  for (const t of tensors) h.update(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  return h.digest('hex').slice(0, 32);
}
