/**
 * A user's regular expression searched in a string in time linear in the string's length, whatever the
 * pattern: V8's backtracking engine takes exponential time on patterns such as `^([a-z0-9_.]+)+!`, and a
 * pattern a request names (a run's `targets`) is matched in the trainer's own process, where one such match
 * would freeze the box's token gate, queue poller and idle stop. The pattern is compiled once into a minimal
 * DFA (refa) with a bounded number of states, then each search walks it one character at a time.
 *
 * Semantics are JavaScript's `new RegExp(pattern).test(text)` (no flags) for every pattern the compiler takes:
 * `^` and `$` become sentinel characters around the text (0x02 before, 0x03 after, which no other part of the
 * pattern matches), so they hold where they may (`(^|\.)q_proj`, `a|b$`). Refused, with the reason:
 * lookarounds and `\b`/`\B`, backreferences refa cannot resolve, an anchor right after another (`^^a`, `$^`; `^$`
 * is fine), and patterns whose automaton would pass the state bound. One difference is not refused: anchors that
 * meet only through an optional part (`^a?^b`) never match here, where JavaScript matches "b".
 */
import { DFA, JS, NFA, TooManyNodesError, type CharSet } from 'refa';

/** A pattern this module cannot search in linear time, or whose automaton is too large. */
export class PatternError extends Error {}

/** Bounds one pattern's automaton: a pathological pattern fails fast instead of eating the process. */
const MAX_NODES = 10_000;
const START = 0x02;
const END = 0x03;
const CACHE_SIZE = 256;
const cache = new Map<string, DFA>();

type Node = { type: string; elements?: Node[]; alternatives?: Node[]; characters?: CharSet; kind?: string; negate?: boolean };

/** `^` is (?<![^]) and `$` is (?![^]) in refa's tree: a negated lookaround of one any-character class. */
function edgeOf(n: Node): 'start' | 'end' | null {
  if (n.type !== 'Assertion' || !n.negate || n.alternatives?.length !== 1) return null;
  const [only] = n.alternatives[0].elements ?? [];
  if (n.alternatives[0].elements?.length !== 1 || only.type !== 'CharacterClass' || !only.characters?.isAll) return null;
  return n.kind === 'behind' ? 'start' : n.kind === 'ahead' ? 'end' : null;
}

/** Anchors become the sentinels; every other class loses them; any other assertion is refused. */
function rewrite(n: Node, sentinels: CharSet, start: CharSet, end: CharSet): void {
  if (n.type === 'CharacterClass') {
    n.characters = n.characters!.without(sentinels);
    return;
  }
  if (n.type === 'Assertion') throw new PatternError('lookarounds and word boundaries (\\b, \\B, (?=…), (?<=…)) are not supported; anchor with ^ and $');
  for (const child of n.alternatives ?? []) rewrite(child, sentinels, start, end);
  if (n.type !== 'Concatenation' || !n.elements) return;
  const edges = n.elements.map(edgeOf);
  n.elements.forEach((e, i) => {
    const edge = edges[i];
    if (edge === null) return rewrite(e, sentinels, start, end);
    // Anchors are zero-width, sentinels are not: two in a row would need two sentinels where the text has one.
    const before = i > 0 ? edges[i - 1] : null;
    if (before !== null && !(before === 'start' && edge === 'end')) throw new PatternError('an anchor right after another (^^, $$, $^) is not supported');
    n.elements![i] = { type: 'CharacterClass', characters: edge === 'start' ? start : end };
  });
}

function compile(pattern: string): DFA {
  try {
    const { expression, maxCharacter } = JS.Parser.fromLiteral({ source: pattern, flags: '' }).parse({ assertions: 'parse', backreferences: 'throw' });
    const sentinels = JS.createCharSet([START, END], { unicode: false });
    rewrite(expression as unknown as Node, sentinels, JS.createCharSet([START], { unicode: false }), JS.createCharSet([END], { unicode: false }));
    // A search: anything (the start sentinel included) before the pattern, anything after.
    const nfa = NFA.fromRegex(expression, { maxCharacter }, { assertions: 'throw', unknowns: 'throw' }, new NFA.LimitedNodeFactory(MAX_NODES));
    const any = NFA.all({ maxCharacter });
    nfa.prepend(any);
    nfa.append(any);
    const dfa = DFA.fromFA(nfa, new DFA.LimitedNodeFactory(MAX_NODES));
    dfa.minimize();
    return dfa;
  } catch (err) {
    if (err instanceof PatternError) throw err;
    if (err instanceof TooManyNodesError) throw new PatternError(`needs more than ${MAX_NODES} automaton states; simplify it`);
    throw new PatternError((err as Error).message.replace(/ yet\.$/, '.'));
  }
}

/** The compiled search for `pattern`; throws PatternError when it cannot be searched in linear time. */
export function linearPattern(pattern: string): DFA {
  const hit = cache.get(pattern);
  if (hit) return hit;
  const dfa = compile(pattern);
  cache.set(pattern, dfa);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return dfa;
}

/** Whether `pattern` occurs in `text`, as `new RegExp(pattern).test(text)` says, in time linear in the text. */
export function searchLinear(pattern: string, text: string): boolean {
  const word = new Array<number>(text.length + 2);
  word[0] = START;
  for (let i = 0; i < text.length; i++) word[i + 1] = text.charCodeAt(i);
  word[text.length + 1] = END;
  return linearPattern(pattern).test(word);
}
