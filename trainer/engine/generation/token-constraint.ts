/**
 * A compiled action constraint over one vocabulary: at each decode step, the tokens whose text keeps the
 * completion a prefix of some match, and end-of-sequence only once the completion is a whole match.
 * Masks are computed lazily per automaton state and kept, so an episode's repeated turns cost one
 * vocabulary walk per state, not per step.
 */
import type { DFA, ReadonlyDFA } from 'refa';
import type { TextCodec } from './text-codec.ts';

type State = DFA.ReadonlyNode;

/**
 * The text each token adds to a completion, or null where a constraint must never pick it (special
 * tokens, and byte tokens that are only part of a UTF-8 character). Decoding after an anchor token and
 * subtracting the anchor keeps the leading spaces that some decoders strip from a completion's first token.
 */
export function vocabularyTexts(tokenizer: TextCodec, vocabSize: number): Array<string | null> {
  const anchorIds = tokenizer.encode('a');
  const anchor = tokenizer.decode(anchorIds);
  const texts = new Array<string | null>(vocabSize);
  for (let id = 0; id < vocabSize; id++) {
    if (tokenizer.specialIds.has(id)) {
      texts[id] = null;
      continue;
    }
    const both = tokenizer.decode([...anchorIds, id]);
    const text = both.startsWith(anchor) ? both.slice(anchor.length) : tokenizer.decode([id]);
    texts[id] = text.length === 0 || text.includes('\uFFFD') ? null : text;
  }
  return texts;
}

export class TokenConstraint {
  private readonly masks = new Map<State, Uint8Array>();
  private readonly steps = new Map<State, Map<number, State | null>>();
  private readonly stuck = new Set<State>();

  constructor(
    private readonly dfa: ReadonlyDFA,
    private readonly texts: ReadonlyArray<string | null>,
    private readonly eosIds: ReadonlySet<number>,
  ) {}

  get initial(): State {
    return this.dfa.initial;
  }

  /** The state after `token`, or null when the token leaves the language (or is end-of-sequence). */
  advance(state: State, token: number): State | null {
    let row = this.steps.get(state);
    if (!row) this.steps.set(state, (row = new Map()));
    const known = row.get(token);
    if (known !== undefined) return known;
    const text = this.texts[token];
    let s: State | null = text == null ? null : state;
    if (text != null) {
      for (const ch of text) {
        s = s!.out.get(ch.codePointAt(0)!) ?? null;
        if (!s) break;
      }
    }
    row.set(token, s);
    return s;
  }

  /** 0/1 over the vocabulary: what may come next from `state`. */
  mask(state: State): Uint8Array {
    const hit = this.masks.get(state);
    if (hit) return hit;
    const mask = new Uint8Array(this.texts.length);
    for (let id = 0; id < this.texts.length; id++) if (this.advance(state, id)) mask[id] = 1;
    if (this.dfa.finals.has(state)) for (const id of this.eosIds) mask[id] = 1;
    if (!mask.includes(1)) this.stuck.add(state);
    this.masks.set(state, mask);
    return mask;
  }

  /**
   * True when decoding must end here: the completion is a whole match that nothing can extend, or no
   * token of this vocabulary can continue it (a pattern the vocabulary cannot spell).
   */
  isFinished(state: State): boolean {
    if (this.dfa.finals.has(state) && state.out.isEmpty) return true;
    this.mask(state);
    return this.stuck.has(state);
  }
}
