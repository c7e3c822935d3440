/**
 * Full mode's perturb / restore / switch on every core. onnxruntime-node refuses tensors over a
 * SharedArrayBuffer, so θ cannot be shared between threads; instead each thread is *lent* some of θ's
 * tensors: their ArrayBuffers are transferred to it (zero-copy, the memory stays where it is), it runs the
 * same exact kernel on them that this thread runs on the rest, and transfers them back. Each tensor is one
 * contiguous span of ε's stream and the exact rule works element by element, so θ and the fix-ups are bit
 * for bit those of the one-thread functions in exact-perturbation.ts, however the tensors are dealt out.
 *
 * A transfer detaches the sender's views, so after every call `segments[i].data` is a new Float32Array over
 * the same memory: callers that keep other views onto θ (the model's tensors, graph initializers) re-link
 * them (OnnxEngine does). θ is perturbed only between runs, so no onnxruntime run reads a lent tensor.
 */
import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import type { ParameterSegment } from '../../../shared/es.ts';
import type { NoiseKey } from '../../../shared/noise.ts';
import { startTsThread } from '../../../shared/threads/ts-thread.ts';
import type { Perturbation } from './exact-perturbation.ts';
import { emptyFixups } from './fixup-list.ts';
import { runJob, transferList, type PerturbationJob, type PerturbationReply } from './perturbation-job.ts';

/**
 * Deal θ's tensors into `parts` groups of nearly equal size (largest first, each to the lightest group).
 * Tensors that are views onto one ArrayBuffer move together: a buffer can only be lent whole.
 */
export function dealTensors(segments: readonly ParameterSegment[], parts: number): number[][] {
  const byBuffer = new Map<ArrayBufferLike, { n: number; items: number[] }>();
  segments.forEach((s, i) => {
    const unit = byBuffer.get(s.data.buffer) ?? { n: 0, items: [] };
    unit.n += s.data.length;
    unit.items.push(i);
    byBuffer.set(s.data.buffer, unit);
  });
  const groups = Array.from({ length: parts }, () => ({ total: 0, items: [] as number[] }));
  const units = [...byBuffer.values()].sort((a, b) => b.n - a.n || a.items[0] - b.items[0]);
  for (const unit of units) {
    let lightest = groups[0];
    for (const g of groups) if (g.total < lightest.total) lightest = g;
    lightest.items.push(...unit.items);
    lightest.total += unit.n;
  }
  return groups.map((g) => g.items.sort((a, b) => a - b));
}

type Op = PerturbationJob['op'];

export class PerturbationPool {
  /** Set when a thread died holding lent tensors: θ is incomplete and every later call fails. */
  private lost: Error | null = null;

  /** Threads still running: one that exits while idle only loses its share of the work, not θ. */
  private readonly running: Worker[];

  private constructor(started: Worker[]) {
    this.running = started;
    for (const w of started) w.once('exit', () => this.running.splice(this.running.indexOf(w), 1));
  }

  /** `threads` threads beside this one (default: one per further core), each running `entry`. */
  static async create(threads = availableParallelism() - 1, entry = new URL('./perturbation-thread.ts', import.meta.url)): Promise<PerturbationPool> {
    const started = Array.from({ length: Math.max(0, threads) }, () => startTsThread(entry));
    await Promise.all(started.map((w) => new Promise<void>((resolve, reject) => { w.once('message', () => resolve()); w.once('error', reject); })));
    for (const w of started) w.unref(); // an idle pool never keeps the process alive
    return new PerturbationPool(started);
  }

  /** Threads that share the work, this one included. */
  get threads(): number {
    return this.running.length + 1;
  }

  /** `perturb` of exact-perturbation.ts on every thread; θ's views are replaced (see the file comment). */
  async perturb(segments: ParameterSegment[], key: NoiseKey, c: number): Promise<Perturbation> {
    return this.perturbation(key, c, await this.run('perturb', segments, key, c, 0, []));
  }

  /** `switchPerturbation` on every thread. */
  async switchTo(segments: ParameterSegment[], from: Perturbation, c: number): Promise<Perturbation> {
    return this.perturbation(from.key, c, await this.run('switch', segments, from.key, c, from.c, from.fixups));
  }

  /** `restore` on every thread. */
  async restore(segments: ParameterSegment[], p: Perturbation): Promise<void> {
    await this.run('restore', segments, p.key, 0, p.c, p.fixups);
  }

  async close(): Promise<void> {
    await Promise.all(this.running.map((w) => w.terminate()));
  }

  private perturbation(key: NoiseKey, c: number, fixups: Perturbation['fixups']): Perturbation {
    return { key, c, fixups, fixupCount: fixups.reduce((a, f) => a + f.count, 0) };
  }

  private async run(op: Op, segments: ParameterSegment[], key: NoiseKey, c: number, fromC: number, fixups: Perturbation['fixups']): Promise<Perturbation['fixups']> {
    if (this.lost) throw this.lost;
    // threadId is −1 once a thread has stopped, which can be before its 'exit' event: lend only to live ones
    const threads = this.running.filter((w) => w.threadId !== -1);
    const [own, ...lent] = dealTensors(segments, threads.length + 1);
    const jobFor = (items: number[]): PerturbationJob => ({
      op,
      key,
      c,
      fromC,
      fixups: op === 'perturb' ? [] : items.map((i) => fixups[i]),
      data: items.map((i) => segments[i].data),
      offsets: items.map((i) => segments[i].offset),
    });
    const out: Perturbation['fixups'] = segments.map(() => emptyFixups());
    // Lend first, so the threads start while this thread does its own share.
    const replies = lent.map((items, w) => (items.length ? this.lend(threads[w], jobFor(items)) : null));
    let ownError: unknown = null;
    try {
      runJob(jobFor(own))?.forEach((f, k) => (out[own[k]] = f));
    } catch (err) {
      ownError = err;
    }
    // Every lent tensor comes back before anything is reported, so θ is whole whatever failed.
    const errors: string[] = ownError ? [(ownError as Error).message] : [];
    for (const [w, reply] of replies.entries()) {
      if (!reply) continue;
      const items = lent[w];
      let r: PerturbationReply;
      try {
        r = await reply;
      } catch (err) {
        this.lost = new Error(`perturbation thread ${w} failed holding θ's tensors ${items.map((i) => segments[i].name).join(', ')} (${(err as Error).message}); θ is lost: reload it from the last checkpoint`);
        errors.push(this.lost.message);
        continue;
      }
      items.forEach((i, k) => {
        segments[i].data = r.data[k];
        if (r.fixups) out[i] = r.fixups[k];
      });
      if (r.error) errors.push(r.error);
    }
    if (errors.length) throw new Error(`${op} on ${threads.length + 1} threads failed: ${errors.join('; ')}`);
    return out;
  }

  private lend(thread: Worker, job: PerturbationJob): Promise<PerturbationReply> {
    // An idle pool is unref'd; while it holds θ's tensors it must keep the process alive until they are back.
    thread.ref();
    return new Promise<PerturbationReply>((resolve, reject) => {
      const onMessage = (m: PerturbationReply) => {
        thread.off('error', onError);
        thread.off('exit', onExit);
        thread.unref();
        resolve(m);
      };
      const onError = (err: Error) => {
        thread.off('message', onMessage);
        thread.off('exit', onExit);
        thread.unref();
        reject(err);
      };
      const onExit = (code: number) => onError(new Error(`thread exited with code ${code}`));
      thread.once('message', onMessage);
      thread.once('error', onError);
      thread.once('exit', onExit);
      try {
        thread.postMessage(job, transferList(job.data, job.fixups));
      } catch (err) {
        // Nothing was transferred: the tensors are still here, untouched.
        thread.off('message', onMessage);
        thread.off('error', onError);
        thread.off('exit', onExit);
        thread.unref();
        resolve({ data: job.data, fixups: null, error: `could not lend tensors to a thread: ${(err as Error).message}` });
      }
    });
  }
}
