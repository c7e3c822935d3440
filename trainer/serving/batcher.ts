/**
 * Dynamic batching in front of the engine. Requests that arrive in one burst (gaps under `windowMs`, at
 * most `maxWaitMs` after the first) or while the engine is busy are decoded together, up to `maxBatch`
 * rows per engine call. The queue is
 * bounded: when it is full `submit` fails at once with QueueFullError (the server answers 429 with
 * Retry-After) instead of letting latency grow without limit.
 *
 * Rows may name different members: the low-rank engine runs them in one forward pass; in full mode the
 * rows are ordered by member so the engine perturbs θ once per member group.
 */
import type { Engine, GenerateResult, GenerateRow, MemberSelector } from '../engine/engine.ts';
import type { ServerMetrics } from './metrics.ts';

export class QueueFullError extends Error {
  constructor(readonly retryAfterSeconds: number) {
    super(`the inference queue is full; retry in ${retryAfterSeconds} s`);
    this.name = 'QueueFullError';
  }
}

/** The row's member stopped being live while it waited (its iteration ended). */
export class StaleMemberError extends Error {
  constructor(selector: MemberSelector) {
    super(`member ${selector.kind === 'member' ? `${selector.iteration}-${selector.index}` : 'base'} is no longer served: its iteration ended while the request was queued`);
    this.name = 'StaleMemberError';
  }
}

export class RequestAbortedError extends Error {
  constructor(reason: unknown) {
    super(`request aborted: ${reason instanceof Error ? reason.message : String(reason ?? 'cancelled')}`);
    this.name = 'RequestAbortedError';
  }
}

export interface BatcherOptions {
  /** A batch closes once no request has arrived for this long (a burst is gathered whole)… */
  windowMs: number;
  /** …or once its first request has waited this long, whichever comes first. */
  maxWaitMs: number;
  maxBatch: number;
  maxQueue: number;
  /** Checked when a row leaves the queue, so nothing stale reaches the engine. */
  isLive: (selector: MemberSelector) => boolean;
}

interface Pending {
  row: GenerateRow;
  resolve: (r: GenerateResult) => void;
  reject: (e: Error) => void;
  detach: () => void;
}

function memberKey(s: MemberSelector): string {
  return s.kind === 'base' ? 'base' : `${s.iteration}-${s.index}`;
}

export class RequestBatcher {
  private readonly queue: Pending[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** When the oldest queued request arrived (performance.now()), for maxWaitMs. */
  private oldestAt = 0;
  private running = false;
  /** Exponential moving average of an engine call's duration, for Retry-After. */
  private batchMs = 1000;

  constructor(
    private readonly engine: Pick<Engine, 'generate' | 'mode'>,
    private readonly metrics: ServerMetrics,
    private readonly options: BatcherOptions,
  ) {}

  get depth(): number {
    return this.queue.length;
  }

  submit(row: GenerateRow): Promise<GenerateResult> {
    if (this.queue.length >= this.options.maxQueue) {
      const batchesAhead = Math.ceil(this.queue.length / this.options.maxBatch) + (this.running ? 1 : 0);
      throw new QueueFullError(Math.max(1, Math.ceil((batchesAhead * this.batchMs) / 1000)));
    }
    return new Promise<GenerateResult>((resolve, reject) => {
      const signal = row.signal;
      if (signal?.aborted) {
        reject(new RequestAbortedError(signal.reason));
        return;
      }
      const onAbort = (): void => {
        const i = this.queue.indexOf(pending);
        if (i >= 0) {
          this.queue.splice(i, 1);
          reject(new RequestAbortedError(signal?.reason));
        }
        // Rows already in an engine call see the same signal there and finish with 'abort'.
      };
      const pending: Pending = { row, resolve, reject, detach: () => signal?.removeEventListener('abort', onAbort) };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.queue.push(pending);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.running) return;
    if (this.queue.length >= this.options.maxBatch) {
      this.flush();
      return;
    }
    if (this.queue.length === 0) return;
    // Each arrival restarts the idle window, but never past the oldest request's maximum wait.
    const now = performance.now();
    if (this.timer === null) this.oldestAt = now;
    else clearTimeout(this.timer);
    const wait = Math.max(0, Math.min(this.options.windowMs, this.oldestAt + this.options.maxWaitMs - now));
    this.timer = setTimeout(() => this.flush(), wait);
  }

  private flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.running || this.queue.length === 0) return;
    const taken = this.queue.splice(0, this.options.maxBatch);
    const batch: Pending[] = [];
    for (const p of taken) {
      p.detach();
      if (this.options.isLive(p.row.member)) batch.push(p);
      else p.reject(new StaleMemberError(p.row.member));
    }
    if (batch.length === 0) {
      this.schedule();
      return;
    }
    if (this.engine.mode === 'full') batch.sort((a, b) => (memberKey(a.row.member) < memberKey(b.row.member) ? -1 : memberKey(a.row.member) > memberKey(b.row.member) ? 1 : 0));
    this.running = true;
    const started = Date.now();
    void this.engine
      .generate(batch.map((p) => p.row))
      .then(
        (results) => {
          const distinct = new Set(batch.map((p) => memberKey(p.row.member))).size;
          this.metrics.batch(
            batch.length,
            results.reduce((a, r) => a + r.promptTokens, 0),
            results.reduce((a, r) => a + r.cachedTokens, 0),
            results.reduce((a, r) => a + r.completionTokens, 0),
            distinct,
          );
          batch.forEach((p, i) => p.resolve(results[i]));
        },
        (err: unknown) => {
          const e = err instanceof Error ? err : new Error(String(err));
          for (const p of batch) p.reject(e);
        },
      )
      .finally(() => {
        this.batchMs = 0.8 * this.batchMs + 0.2 * (Date.now() - started);
        this.running = false;
        // Requests that arrived during the call have already waited a whole forward pass: go at once.
        if (this.queue.length > 0) this.flush();
      });
  }

  /** Rejects everything still queued; in-flight engine calls finish on their own. */
  close(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    for (const p of this.queue.splice(0)) {
      p.detach();
      p.reject(new RequestAbortedError('server closing'));
    }
  }
}
