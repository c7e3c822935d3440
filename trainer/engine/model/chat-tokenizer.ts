/**
 * A model's tokenizer and chat template: tokenizer.json through @huggingface/tokenizers, the template from
 * tokenizer_config.json through @huggingface/jinja. Same code for built and downloaded models. Tools and
 * tool turns are rendered through the template (chat-tools.ts) in the family's tool format (tool-format.ts).
 */
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import type { ChatMessage, ToolSpec } from '../../../shared/ports/policy.ts';
import { templateInputs } from './chat-tools.ts';
import { detectToolFormat, templateRendersTools, type ToolFormat } from './tool-format.ts';

function tokenString(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && 'content' in v && typeof (v as { content: unknown }).content === 'string') return (v as { content: string }).content;
  return undefined;
}

/** The template refused the conversation (raise_exception, e.g. Gemma's user/assistant alternation): the client's input. */
export class ChatTemplateError extends Error {}

export class ChatTokenizer {
  private readonly tokenizer: Tokenizer;
  private readonly template: Template | null;
  readonly bosToken: string | undefined;
  readonly eosToken: string | undefined;
  /** Ids of the special tokens, which `decode` leaves out of completions. */
  readonly specialIds: ReadonlySet<number>;
  /** How this model writes tool calls. */
  readonly toolFormat: ToolFormat;
  /** Ids the tokenizer can produce: 0..tokenCount−1 (a model's vocab_size may be padded past it). */
  readonly tokenCount: number;
  /** Whether the template renders tools itself (else chat-tools.ts writes them into the messages). */
  private readonly nativeTools: boolean;

  constructor(tokenizerJson: Record<string, unknown>, tokenizerConfig: Record<string, unknown>, file = 'tokenizer.json') {
    try {
      this.tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
    } catch (err) {
      throw new Error(`${file}: cannot build the tokenizer (${(err as Error).message})`);
    }
    const template = tokenizerConfig.chat_template;
    if (template !== undefined && typeof template !== 'string') throw new Error('tokenizer_config.json: chat_template must be a string (named templates are not supported)');
    try {
      this.template = template ? new Template(template) : null;
    } catch (err) {
      throw new Error(`tokenizer_config.json: chat_template does not parse (${(err as Error).message})`);
    }
    this.toolFormat = detectToolFormat(template ?? null);
    this.nativeTools = templateRendersTools(template ?? null);
    this.bosToken = tokenString(tokenizerConfig.bos_token);
    this.eosToken = tokenString(tokenizerConfig.eos_token);
    this.tokenCount = tokenCountOf(tokenizerJson);
    this.specialIds = new Set(
      ((tokenizerJson.added_tokens ?? []) as Array<{ id: number; special?: boolean }>).filter((t) => t.special).map((t) => t.id),
    );
  }

  encode(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: number[]): string {
    if (ids.length === 0) return '';
    return this.tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
  }

  tokenId(token: string): number | undefined {
    return this.tokenizer.token_to_id(token);
  }

  /** The prompt text for a chat, ending with the assistant's generation prompt. */
  renderChat(messages: ChatMessage[], tools?: ToolSpec[]): string {
    if (!this.template) throw new Error('tokenizer_config.json has no chat_template: send prompt ids, not messages');
    const inputs = templateInputs(this.toolFormat, this.nativeTools, messages, tools);
    try {
      return this.template.render({ ...inputs, add_generation_prompt: true, bos_token: this.bosToken ?? '', eos_token: this.eosToken ?? '' });
    } catch (err) {
      throw new ChatTemplateError(`the chat template cannot render these messages: ${(err as Error).message}`);
    }
  }

  encodeChat(messages: ChatMessage[], tools?: ToolSpec[]): number[] {
    return this.encode(this.renderChat(messages, tools));
  }
}

/** One past the highest id in the tokenizer's vocabulary (BPE/WordPiece: a map; Unigram: a list) and added tokens. */
function tokenCountOf(json: Record<string, unknown>): number {
  const vocab = (json.model as { vocab?: unknown } | undefined)?.vocab;
  let count = Array.isArray(vocab) ? vocab.length : 0;
  if (vocab && typeof vocab === 'object' && !Array.isArray(vocab)) for (const id of Object.values(vocab as Record<string, number>)) count = Math.max(count, id + 1);
  for (const t of (json.added_tokens ?? []) as Array<{ id: number }>) count = Math.max(count, t.id + 1);
  return count;
}
