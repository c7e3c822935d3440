/**
 * Incremental text of one decoding row, for streaming. The decode loop re-decodes the row's tokens after each
 * step; this hands the caller only the part of that text that can no longer change or be cut:
 *   - a trailing U+FFFD is held back: a byte-level (or byte-fallback) tokenizer decodes an incomplete
 *     multi-byte character as U+FFFD and the next token may complete it into a different character;
 *   - the longest suffix that is still a proper prefix of a stop string is held back: the next token may
 *     complete the stop string, and the completion is cut before it.
 * On finish the rest of the final text is flushed, so the deltas always concatenate to the final text.
 */
const REPLACEMENT = 0xfffd;

/** How much of `text` (a completion with no whole stop string in it yet) is safe to show. */
export function streamableLength(text: string, stops: readonly string[]): number {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === REPLACEMENT) end--;
  let held = 0;
  for (const stop of stops) {
    for (let k = Math.min(stop.length - 1, end); k > held; k--) {
      if (text.startsWith(stop.slice(0, k), end - k)) {
        held = k;
        break;
      }
    }
  }
  return end - held;
}

export class TextStream {
  /** Characters of the decoded text already handed to `onText`. */
  private sent = 0;

  constructor(
    private readonly stops: readonly string[],
    private readonly onText: (delta: string) => void,
  ) {}

  /** After a decode step: `text` is the whole completion so far, with no stop string in it. */
  update(text: string): void {
    this.emitUpTo(text, streamableLength(text, this.stops));
  }

  /** The row finished: `text` is its final completion (already cut before a stop string). */
  finish(text: string): void {
    this.emitUpTo(text, text.length);
  }

  private emitUpTo(text: string, end: number): void {
    if (end <= this.sent) return;
    const delta = text.slice(this.sent, end);
    this.sent = end;
    this.onText(delta);
  }
}
