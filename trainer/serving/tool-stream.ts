/**
 * Streaming with tools: text is sent as content as it comes until it may be the start of a tool call
 * (`<tool_call>` for Hermes, a leading `{` for Llama's JSON); from there it is held until the completion
 * ends, then sent as tool_call deltas if it parses, or as content if it does not.
 */
import type { ToolFormat } from '../engine/model/tool-format.ts';

const OPEN = '<tool_call>';

export class ToolCallHold {
  private text = '';
  private sent = 0;

  constructor(private readonly format: ToolFormat) {}

  /** Adds a piece of the completion; returns the content that can be sent now ('' for none). */
  push(delta: string): string {
    this.text += delta;
    const end = this.safeEnd();
    if (end <= this.sent) return '';
    const out = this.text.slice(this.sent, end);
    this.sent = end;
    return out;
  }

  /** What has been held back so far (the completion from the first possible call on). */
  get held(): string {
    return this.text.slice(this.sent);
  }

  /** Where the text stops being certainly content. */
  private safeEnd(): number {
    if (this.format === 'llama3-json') {
      const lead = this.text.trimStart();
      const maybeCall = lead === '' || lead.startsWith('{') || lead.startsWith('<|python_tag|>') || '<|python_tag|>'.startsWith(lead);
      return maybeCall ? this.sent : this.text.length;
    }
    const open = this.text.indexOf(OPEN, this.sent);
    if (open >= 0) return open;
    // A tail that may still grow into `<tool_call>` waits for the next piece.
    for (let i = Math.max(this.sent, this.text.length - OPEN.length + 1); i < this.text.length; i++) {
      if (OPEN.startsWith(this.text.slice(i))) return i;
    }
    return this.text.length;
  }
}
