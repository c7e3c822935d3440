/**
 * A model's tokenizer and chat template: tokenizer.json through @huggingface/tokenizers, the template from
 * tokenizer_config.json through @huggingface/jinja. Same code for built and downloaded models.
 */
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import type { ChatMessage } from '../../shared/ports/policy.ts';

function tokenString(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && 'content' in v && typeof (v as { content: unknown }).content === 'string') return (v as { content: string }).content;
  return undefined;
}

export class ChatTokenizer {
  private readonly tokenizer: Tokenizer;
  private readonly template: Template | null;
  readonly bosToken: string | undefined;
  readonly eosToken: string | undefined;
  /** Ids of the special tokens, which `decode` leaves out of completions. */
  readonly specialIds: ReadonlySet<number>;

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
    this.bosToken = tokenString(tokenizerConfig.bos_token);
    this.eosToken = tokenString(tokenizerConfig.eos_token);
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
  renderChat(messages: ChatMessage[]): string {
    if (!this.template) throw new Error('tokenizer_config.json has no chat_template: send prompt ids, not messages');
    return this.template.render({ messages, add_generation_prompt: true, bos_token: this.bosToken ?? '', eos_token: this.eosToken ?? '' });
  }

  encodeChat(messages: ChatMessage[]): number[] {
    return this.encode(this.renderChat(messages));
  }
}
