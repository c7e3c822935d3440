/**
 * Noise on every core: a pool of threads that split `θ += c·ε` over a SharedArrayBuffer-backed θ.
 * Work is cut on stream-chunk boundaries, so the result is bit-identical to the single-threaded path.
 */
import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { CHUNK, type NoiseKey } from './noise.ts';
import { startTsThread } from './threads/ts-thread.ts';

export type PoolJob =
  | { op: 'noise'; theta: Float32Array; key: NoiseKey; c: number; offset: number; start: number; end: number }
  | { op: 'axpy'; theta: Float32Array; src: Float32Array; c: number; start: number; end: number };

export class NoisePool {
  private constructor(private readonly running: Worker[]) {}

  get size(): number {
    return this.running.length;
  }

  static async create(threads = availableParallelism()): Promise<NoisePool> {
    const url = new URL('./noise-thread.ts', import.meta.url);
    const started = Array.from({ length: Math.max(1, threads) }, () => startTsThread(url));
    await Promise.all(started.map((w) => new Promise<void>((resolve, reject) => { w.once('message', () => resolve()); w.once('error', reject); })));
    return new NoisePool(started);
  }

  /** θ[start:end] += c·ε[offset+start : offset+end], split across the pool. θ must live in a SharedArrayBuffer. */
  applyNoise(theta: Float32Array, key: NoiseKey, c: number, offset = 0, start = 0, end = theta.length): Promise<void> {
    return this.split(start, end, offset, (s, e) => ({ op: 'noise', theta, key, c, offset, start: s, end: e }));
  }

  /** θ += c·src, split across the pool (the memory-bound ceiling the noise benchmark compares against). */
  axpy(theta: Float32Array, src: Float32Array, c: number): Promise<void> {
    return this.split(0, theta.length, 0, (s, e) => ({ op: 'axpy', theta, src, c, start: s, end: e }));
  }

  async close(): Promise<void> {
    await Promise.all(this.running.map((w) => w.terminate()));
  }

  private async split(start: number, end: number, offset: number, job: (s: number, e: number) => PoolJob): Promise<void> {
    const probe = job(start, end);
    if (!(probe.theta.buffer instanceof SharedArrayBuffer)) throw new TypeError('NoisePool needs θ backed by a SharedArrayBuffer');
    const n = this.running.length;
    const first = Math.floor((offset + start) / CHUNK);
    const per = Math.ceil((Math.ceil((offset + end) / CHUNK) - first) / n);
    // Cut points sit on absolute stream-chunk boundaries (offset + index ≡ 0 mod CHUNK).
    const cut = (k: number) => Math.min(end, Math.max(start, (first + k * per) * CHUNK - offset));
    const parts: Promise<void>[] = [];
    for (let k = 0; k < n; k++) {
      const s = cut(k);
      const e = k === n - 1 ? end : cut(k + 1);
      if (s >= e) continue;
      const w = this.running[k];
      parts.push(
        new Promise<void>((resolve, reject) => {
          const onMessage = (m: { error?: string }) => {
            w.off('error', reject);
            if (m.error) reject(new Error(m.error));
            else resolve();
          };
          w.once('message', onMessage);
          w.once('error', reject);
          w.postMessage(job(s, e));
        }),
      );
    }
    await Promise.all(parts);
  }
}
