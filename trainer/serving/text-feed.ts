/**
 * The pieces of one streamed completion on their way from the decode loop (which pushes synchronously, between
 * forward passes) to the SSE writer (which awaits each network write). Pieces queue while a write is pending,
 * so decoding never waits for a slow client.
 */
export class TextFeed {
  private readonly pending: string[] = [];
  private wake: (() => void) | null = null;
  private closed = false;
  private markStarted!: () => void;
  /** Resolves when the first piece arrives (never, if the completion ends without one). */
  readonly started = new Promise<void>((resolve) => (this.markStarted = resolve));
  hasStarted = false;

  push(delta: string): void {
    this.pending.push(delta);
    if (!this.hasStarted) {
      this.hasStarted = true;
      this.markStarted();
    }
    this.wake?.();
  }

  /** No more pieces: iteration ends once the queued ones are taken. */
  close(): void {
    this.closed = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<string> {
    for (;;) {
      const next = this.pending.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (this.closed) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = null;
    }
  }
}
