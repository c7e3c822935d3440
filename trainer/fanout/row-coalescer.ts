/**
 * Rows submitted to the engine in the same macrotask go to it as one `generate` call, so concurrent
 * in-process episodes decode as one batch (in full mode the engine groups the rows by member). A call
 * in flight does not hold new rows back: they form the next call, which the engine runs after it. A
 * batch that fails is retried row by row, so one bad row (a stale member, say) fails only its own episode.
 */
import type { Engine, GenerateResult, GenerateRow } from '../engine/engine.ts';

interface Pending {
  row: GenerateRow;
  resolve: (r: GenerateResult) => void;
  reject: (e: unknown) => void;
}

export class RowCoalescer {
  private queue: Pending[] = [];
  private scheduled = false;

  constructor(private readonly engine: Pick<Engine, 'generate'>) {}

  generate(row: GenerateRow): Promise<GenerateResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ row, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    this.engine.generate(batch.map((p) => p.row)).then(
      (results) => batch.forEach((p, i) => p.resolve(results[i])),
      (err: unknown) => {
        if (batch.length === 1) return batch[0].reject(err);
        for (const p of batch) this.engine.generate([p.row]).then(([r]) => p.resolve(r), p.reject);
      },
    );
  }
}
