/**
 * An action constraint compiled to a character-level DFA (refa), matched against the whole completion.
 * The DFA does not depend on any vocabulary, so the inference server can validate a request's constraint
 * before it queues it, and every engine reuses the same compiled automaton through the cache.
 */
import { DFA, JS, NFA, TooManyNodesError } from 'refa';
import type { ActionConstraint } from '../../../shared/ports/policy.ts';

/** A constraint that does not compile, or that no completion could ever match. */
export class ConstraintError extends Error {}

/** Bounds the DFA of one constraint: a pathological pattern fails fast instead of eating the trainer. */
const MAX_NODES = 20_000;
/** Episodes repeat their environments' patterns; a small cache keeps compiling off the hot path. */
const CACHE_SIZE = 256;
const cache = new Map<string, DFA>();

/** The regular expression source a constraint stands for (a choice is an alternation of literals). */
export function constraintSource(c: ActionConstraint): string {
  if ('choice' in c) return c.choice.map((s) => s.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&')).join('|');
  // The whole reply is matched anyway, so anchors the caller wrote out of habit are redundant: drop them.
  return c.regex.replace(/^\^/, '').replace(/(?<!\\)\$$/, '');
}

export function compileConstraint(c: ActionConstraint): DFA {
  const source = constraintSource(c);
  const hit = cache.get(source);
  if (hit) {
    cache.delete(source);
    cache.set(source, hit);
    return hit;
  }
  let dfa: DFA;
  try {
    const { expression, maxCharacter } = JS.Parser.fromLiteral({ source, flags: 'u' }).parse();
    const nfa = NFA.fromRegex(expression, { maxCharacter }, { assertions: 'throw', unknowns: 'throw' }, new NFA.LimitedNodeFactory(MAX_NODES));
    dfa = DFA.fromFA(nfa, new DFA.LimitedNodeFactory(MAX_NODES));
    dfa.minimize();
  } catch (err) {
    if (err instanceof TooManyNodesError) throw new ConstraintError(`the pattern needs more than ${MAX_NODES} automaton states; simplify it`);
    throw new ConstraintError(`the pattern does not compile: ${(err as Error).message}`);
  }
  if (dfa.finals.size === 0) throw new ConstraintError('no reply can match the pattern');
  cache.set(source, dfa);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return dfa;
}
