import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine, GenerateRow } from '../../trainer/engine/engine.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { compileConstraint, ConstraintError } from '../../trainer/engine/generation/regex-automaton.ts';

// An untrained model: whatever it would say, the constraint decides what it may say.
let engine: Engine;
beforeAll(async () => {
  engine = await createEngine({ model: { preset: 'tiny', seed: 3 }, mode: 'full' });
});
afterAll(() => engine.close());

function row(over: Partial<GenerateRow> = {}): GenerateRow {
  return { messages: [{ role: 'user', content: 'Your move.' }], member: { kind: 'base' }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 40, stop: [], ...over };
}
const sampled = (seed: number) => ({ temperature: 1.5, topP: 1, topK: 0, seed });

describe('regex and choice constraints in decoding', () => {
  it('every sampled completion matches the regex as a whole and ends by itself', async () => {
    const regex = 'place (1 2|3 4|4 1) [1-4]';
    const results = await engine.generate(Array.from({ length: 24 }, (_, i) => row({ constraint: { regex }, sampling: sampled(i) })));
    const whole = new RegExp(`^(?:${regex})$`);
    for (const r of results) {
      expect(r.text).toMatch(whole);
      expect(r.finishReason).toBe('stop');
      // A fixed-length pattern is left without spending a step on end-of-sequence.
      expect(r.completionTokens).toBe(r.text.length);
    }
    // Sampling still chooses: the cells and digits are not all the same.
    expect(new Set(results.map((r) => r.text)).size).toBeGreaterThan(3);
  });

  it('an unconstrained row in the same batch is unaffected', async () => {
    const [alone] = await engine.generate([row()]);
    const [, beside] = await engine.generate([row({ constraint: { regex: 'a+' } }), row()]);
    expect(beside.tokenIds).toEqual(alone.tokenIds);
  });

  it('a choice is one of its strings; open patterns stop at end-of-sequence or the budget, still a prefix of a match', async () => {
    const choice = ['move left', 'move right', 'wait'];
    const picks = await engine.generate(Array.from({ length: 12 }, (_, i) => row({ constraint: { choice }, sampling: sampled(100 + i) })));
    for (const p of picks) expect(choice).toContain(p.text);
    const open = await engine.generate(Array.from({ length: 8 }, (_, i) => row({ constraint: { regex: '[ab]+(c|d)*' }, sampling: sampled(200 + i), maxNewTokens: 9 })));
    for (const o of open) {
      expect(o.text).toMatch(/^[ab]+[cd]*$|^[ab]*$/);
      if (o.finishReason === 'length') expect(o.completionTokens).toBe(9);
    }
  });

  it('combines with an allowed-token mask (the intersection is decoded)', async () => {
    const ids = (s: string) => [...s].map((ch) => ch.charCodeAt(0)); // byte-level vocabulary of built models
    const results = await engine.generate(Array.from({ length: 8 }, (_, i) => row({ constraint: { regex: '[a-d]{3}' }, allowedTokenIds: ids('bd'), sampling: sampled(300 + i) })));
    for (const r of results) expect(r.text).toMatch(/^[bd]{3}$/);
  });

  it('rejects patterns that do not compile, cannot match or are too large, with the reason', () => {
    expect(() => compileConstraint({ regex: '(a' })).toThrow(ConstraintError);
    expect(() => compileConstraint({ regex: '(a' })).toThrow(/does not compile/);
    expect(() => compileConstraint({ regex: 'a\\bb' })).toThrow(/does not compile: Assertions/);
    expect(() => compileConstraint({ regex: '[^\\s\\S]' })).toThrow(/no reply can match/);
    expect(() => compileConstraint({ regex: '(a|b)*a(a|b){14}' })).toThrow(/automaton states/);
    // Anchors are redundant (the whole reply is matched) and accepted.
    expect(compileConstraint({ regex: '^ab$' })).toBe(compileConstraint({ regex: 'ab' }));
    // A choice's strings are literals, not patterns.
    expect(compileConstraint({ choice: ['a.b'] }).finals.size).toBeGreaterThan(0);
  });
});
