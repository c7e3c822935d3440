/**
 * Searching a user's pattern in linear time (shared/linear-pattern.ts): the same answers as
 * `new RegExp(p).test(s)` wherever the pattern is taken, refusals with their reason, and time that stays
 * flat on the patterns V8 backtracks on.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { linearPattern, PatternError, searchLinear } from '../../shared/linear-pattern.ts';

const NAMES = ['model.layers.27.self_attn.q_proj.weight', 'model.norm.weight', 'model.layers.0.input_layernorm.weight', 'lm_head.weight', 'x', '', 'onnx::MatMul_540', 'layers.0.self_attn.q_proj'];
const PATTERNS = ['q_proj', '^model\\.layers\\.\\d+\\.', 'weight$', 'layernorm|norm\\.weight$', '^lm_head|q_proj$', '(^|\\.)q_proj(\\.|$)', 'a^b', '', '^$', '^x$', '.x', '[^a]', 'layers\\.1\\.', '[\\s\\S]*', '^(?:model|lm_head)\\.', 'MatMul_\\d{3}$', 'self_attn\\.(q|k|v)_proj'];

describe('searchLinear', () => {
  it('answers as RegExp.prototype.test does, anchors included', () => {
    for (const p of PATTERNS) expect(NAMES.map((n) => searchLinear(p, n)), p).toEqual(NAMES.map((n) => new RegExp(p).test(n)));
  });

  it('agrees with RegExp on random patterns over random names', () => {
    const atom = fc.constantFrom('a', 'b', '\\.', '.', '[ab]', '[^a]', '\\d', '(a|b)', '(?:ab|b)', 'a*', 'b+', '(a|\\.)?', '_');
    const pattern = fc.tuple(fc.boolean(), fc.array(atom, { minLength: 0, maxLength: 5 }), fc.boolean()).map(([s, parts, e]) => `${s ? '^' : ''}${parts.join('')}${e ? '$' : ''}`);
    const name = fc.string({ unit: fc.constantFrom('a', 'b', '.', '1', '_'), maxLength: 12 });
    fc.assert(fc.property(pattern, name, (p, n) => searchLinear(p, n) === new RegExp(p).test(n)), { numRuns: 2_000 });
  });

  it('stays linear where V8 backtracks: a 10,000-character name against ^([a-z0-9_.]+)+!', () => {
    const name = `${'a'.repeat(5_000)}${'.b'.repeat(2_500)}`;
    linearPattern('^([a-z0-9_.]+)+!');
    const t0 = performance.now();
    expect(searchLinear('^([a-z0-9_.]+)+!', name)).toBe(false);
    expect(searchLinear('^([a-z0-9_.]+)+!', `${name}!`)).toBe(true);
    expect(performance.now() - t0).toBeLessThan(500);
  });

  it('refuses, with the reason, what it cannot search in linear time', () => {
    const refused = (p: string) => {
      try {
        linearPattern(p);
      } catch (err) {
        expect(err).toBeInstanceOf(PatternError);
        return (err as Error).message;
      }
      return 'taken';
    };
    expect(refused('\\bq_proj')).toMatch(/lookarounds and word boundaries/);
    expect(refused('(?=q)q')).toMatch(/lookarounds/);
    expect(refused('^^x')).toMatch(/an anchor right after another/);
    expect(refused('a$^b')).toMatch(/an anchor right after another/);
    expect(refused('(a|b)*a(a|b){16}')).toMatch(/needs more than 10000 automaton states/);
    expect(refused('^$')).toBe('taken');
  });
});
