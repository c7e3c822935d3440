import { describe, expect, it } from 'vitest';
import { SeededRandom } from '../../environments/random.ts';
import { IncrementalText } from '../../trainer/engine/generation/incremental-text.ts';
import { byteTokenizerConfig, byteTokenizerJson, bytesToUnicode } from '../../trainer/engine/model/byte-tokenizer.ts';
import { ChatTokenizer } from '../../trainer/engine/model/chat-tokenizer.ts';

const utf8 = (s: string) => [...Buffer.from(s, 'utf8')];

/**
 * Byte-level BPE (GPT-2 / Qwen style) with merges whose tokens end or start inside a character: "b" + the
 * first byte of "€", the last two bytes of "€" + "a", two of the three bytes of "日".
 */
function byteLevelBpe(): { tokenizer: ChatTokenizer; ids: number[] } {
  const json = byteTokenizerJson();
  const model = json.model as { vocab: Record<string, number>; merges: string[] };
  const table = bytesToUnicode();
  let next = Math.max(...Object.values(model.vocab)) + 1;
  for (const word of [utf8('th'), utf8('the'), utf8(' w'), utf8(' wo'), utf8('é'), utf8('€'), [...utf8('b'), 0xe2], [0x82, 0xac, ...utf8('a')], [0xe6, 0x97]]) {
    // Each word's merges build it left to right: (c1, c2), (c1c2, c3), …
    let left = table[word[0]];
    for (const byte of word.slice(1)) {
      const right = table[byte];
      if (!(left + right in model.vocab)) {
        model.merges.push(`${left} ${right}`);
        model.vocab[left + right] = next++;
      }
      left += right;
    }
  }
  const specials = new Set((json.added_tokens as Array<{ id: number }>).map((t) => t.id));
  return { tokenizer: new ChatTokenizer(json, byteTokenizerConfig()), ids: Object.values(model.vocab).filter((id) => !specials.has(id)) };
}

/** SentencePiece as Llama's tokenizer.json has it: "▁" for spaces, byte fallback, and a decoder that strips the text's leading space. */
function sentencePieceBpe(): ChatTokenizer {
  const vocab: Record<string, number> = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = 3 + b;
  const pieces = ['▁', 'a', 'b', 'c', '▁a', '▁b', 'ab', '▁ab', 'é', '▁é', 'x'];
  pieces.forEach((p, i) => (vocab[p] = 259 + i));
  const json = {
    version: '1.0',
    added_tokens: ['<unk>', '<s>', '</s>'].map((content, id) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
    pre_tokenizer: null,
    post_processor: null,
    decoder: {
      type: 'Sequence',
      decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }],
    },
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges: ['▁ a', '▁ b', 'a b', '▁a b', '▁ é'] },
  };
  return new ChatTokenizer(json, { bos_token: '<s>', eos_token: '</s>', chat_template: '' });
}

const kinds: Array<[string, () => { tokenizer: ChatTokenizer; ids: number[] }]> = [
  ['byte-level, no merges (built models)', () => ({ tokenizer: new ChatTokenizer(byteTokenizerJson(), byteTokenizerConfig()), ids: Array.from({ length: 256 }, (_, i) => i) })],
  ['byte-level BPE with merges inside characters', byteLevelBpe],
  ['SentencePiece with byte fallback', () => ({ tokenizer: sentencePieceBpe(), ids: Array.from({ length: 256 + 11 }, (_, i) => 3 + i) })],
];

/** Token ids mostly from `common` (whole characters and words), now and then any id (broken bytes). */
function draw(rng: SeededRandom, ids: number[], common: number[], n: number): number[] {
  return Array.from({ length: n }, () => (rng.float() < 0.7 ? rng.pick(common) : rng.pick(ids)));
}

describe('incremental text of a decoding row', () => {
  for (const [name, make] of kinds) {
    it(`${name}: at every step the text equals the decode of all the tokens so far`, () => {
      const { tokenizer, ids } = make();
      const common = [...new Set(['a', 'b', ' ', 'é', '€', 'the', ' wo', 'b€a', '日本'].flatMap((s) => tokenizer.encode(s)))];
      const rng = new SeededRandom(7);
      for (let trial = 0; trial < 40; trial++) {
        const tokens: number[] = [];
        const live = new IncrementalText((x) => tokenizer.decode(x));
        for (const id of draw(rng, ids, common, 60)) {
          tokens.push(id);
          live.advance(tokens);
          expect(live.text).toBe(tokenizer.decode(tokens));
          expect(tokenizer.decode(tokens).startsWith(live.text.slice(0, live.stableLength))).toBe(true);
        }
      }
    });
  }

  it('decodes a bounded window per token, not the whole completion', () => {
    const { tokenizer } = byteLevelBpe();
    let decoded = 0;
    const live = new IncrementalText((x) => ((decoded += x.length), tokenizer.decode(x)));
    const tokens: number[] = [];
    const text = 'the wolf ate the €a and é! '.repeat(80);
    for (const id of tokenizer.encode(text)) {
      tokens.push(id);
      live.advance(tokens);
    }
    expect(live.text).toBe(text);
    // Whole-completion decodes would add up to n²/2 ≈ 1.6 M ids here.
    expect(decoded).toBeLessThan(8 * tokens.length);
  });

  it('keeps an incomplete character pending until a later token completes it', () => {
    const tokenizer = new ChatTokenizer(byteTokenizerJson(), byteTokenizerConfig());
    const live = new IncrementalText((x) => tokenizer.decode(x));
    const tokens = utf8('a');
    live.advance(tokens);
    tokens.push(0xe2);
    live.advance(tokens);
    expect([live.text, live.stableLength]).toEqual(['a\uFFFD', 1]);
    tokens.push(0x82, 0xac);
    live.advance(tokens);
    expect([live.text, live.stableLength]).toEqual(['a€', 2]);
  });
});
