/**
 * The tokenizer of built models: byte-level (GPT-2's byte↦unicode table, no merges), so any text
 * round-trips, plus ChatML's special tokens. Written as an ordinary Hugging Face tokenizer.json and
 * tokenizer_config.json (with a chat template), so built models load through the same path as downloads.
 */
export const BYTE_VOCAB = { size: 260, endOfText: 256, bos: 256, imStart: 257, imEnd: 258, pad: 259 } as const;

const SPECIALS: Array<[number, string]> = [
  [BYTE_VOCAB.endOfText, '<|endoftext|>'],
  [BYTE_VOCAB.imStart, '<|im_start|>'],
  [BYTE_VOCAB.imEnd, '<|im_end|>'],
  [BYTE_VOCAB.pad, '<|pad|>'],
];

export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** GPT-2's reversible map from bytes to printable unicode characters. */
export function bytesToUnicode(): string[] {
  const printable: number[] = [];
  for (let b = 33; b <= 126; b++) printable.push(b);
  for (let b = 161; b <= 172; b++) printable.push(b);
  for (let b = 174; b <= 255; b++) printable.push(b);
  const table = new Array<string>(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    table[b] = printable.includes(b) ? String.fromCharCode(b) : String.fromCharCode(256 + extra++);
  }
  return table;
}

const BYTE_LEVEL = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false };

export function byteTokenizerJson(): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  bytesToUnicode().forEach((ch, b) => (vocab[ch] = b));
  for (const [id, content] of SPECIALS) vocab[content] = id;
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIALS.map(([id, content]) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: null,
    pre_tokenizer: BYTE_LEVEL,
    post_processor: null,
    decoder: BYTE_LEVEL,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: [] },
  };
}

export function byteTokenizerConfig(): Record<string, unknown> {
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: '<|endoftext|>',
    eos_token: '<|im_end|>',
    pad_token: '<|pad|>',
    unk_token: null,
    model_max_length: 2048,
    add_bos_token: false,
    chat_template: CHATML_TEMPLATE,
  };
}
