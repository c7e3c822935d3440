/**
 * A decoding row's text, followed token by token for what reads it mid-row (stop strings, streaming)
 * without decoding the whole completion again at every step: that made such rows O(n²) in the
 * completion's length (docs/BENCHMARKS.md).
 *
 * The prefix-offset scheme of Hugging Face's text-generation-inference and vLLM: each step decodes only a
 * window that starts one emitted piece back (`prefixOffset`). Tokenizers whose decoders look at
 * neighbouring tokens (SentencePiece's leading-space strip, byte fallback, byte-level BPE) then decode
 * the new tokens with the context they need, and the text they add is the window's decode minus the
 * decode of its already-read part. A window whose decode ends in U+FFFD stops at an incomplete
 * character: its text stays `pending` (it may still change) until a later token completes it.
 *
 * For such tokenizers `stable + pending` equals the decode of all the tokens at every step
 * (test/engine/incremental-text.test.ts checks it on three kinds).
 */
const REPLACEMENT = '\uFFFD';

export class IncrementalText {
  /** Text no later token can change. */
  private stable = '';
  /** The window's text after `stable`: what its last tokens decode to now, which a later token may still change. */
  private pending = '';
  /** Where the window starts: the tokens before it only ever add to `stable`. */
  private prefixOffset = 0;
  /** The tokens before this are in `stable`; those from here on are `pending`. */
  private readOffset = 0;
  /** The decode of tokens [prefixOffset, readOffset). */
  private prefixText = '';

  constructor(private readonly decode: (ids: number[]) => string) {}

  /** `tokens` is the row's whole completion so far: the previous call's tokens and one or more new ones. */
  advance(tokens: readonly number[]): void {
    const windowText = this.decode(tokens.slice(this.prefixOffset));
    const fresh = windowText.slice(this.prefixText.length);
    if (fresh.length === 0 || windowText.endsWith(REPLACEMENT)) {
      this.pending = fresh;
      return;
    }
    this.stable += fresh;
    this.pending = '';
    this.prefixOffset = this.readOffset;
    this.readOffset = tokens.length;
    this.prefixText = this.decode(tokens.slice(this.prefixOffset, this.readOffset));
  }

  /** The completion's text now. */
  get text(): string {
    return this.stable + this.pending;
  }

  /** Length of the text no later token can change: a search that has covered it need not cover it again. */
  get stableLength(): number {
    return this.stable.length;
  }
}
