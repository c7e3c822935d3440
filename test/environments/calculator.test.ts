import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CalculatorError, evaluate } from '../../environments/tools/calculator.ts';

// Expression trees rendered to text and computed directly, to check the parser against arithmetic.
type Tree = { n: number } | { op: '+' | '-' | '*'; a: Tree; b: Tree } | { neg: Tree };
const tree: fc.Arbitrary<Tree> = fc.letrec<{ t: Tree }>((tie) => ({
  t: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.record({ n: fc.integer({ min: 0, max: 999 }) }),
    fc.record({ op: fc.constantFrom('+', '-', '*'), a: tie('t'), b: tie('t') }),
    fc.record({ neg: tie('t') }),
  ),
})).t;
function text(t: Tree): string {
  if ('n' in t) return String(t.n);
  if ('neg' in t) return `-(${text(t.neg)})`;
  return `(${text(t.a)} ${t.op} ${text(t.b)})`;
}
function value(t: Tree): number {
  if ('n' in t) return t.n;
  if ('neg' in t) return -value(t.neg);
  const a = value(t.a);
  const b = value(t.b);
  return t.op === '+' ? a + b : t.op === '-' ? a - b : a * b;
}

describe('calculator', () => {
  it.each([
    ['1 + 2 * 3', 7],
    ['(1 + 2) * 3', 9],
    ['2 ^ 3 ^ 2', 512],
    ['2 ** 10', 1024],
    ['-2 ^ 2', -4],
    ['10 % 4', 2],
    ['7 / 2', 3.5],
    ['1.5e3 + .5', 1500.5],
    ['round(2 / 3, 2)', 0.67],
    ['max(1, 5, 3) - min(4, 2)', 3],
    ['abs(-3) + sqrt(16) + floor(2.7) + ceil(2.1)', 12],
    ['2 * pi', 2 * Math.PI],
    ['3 * 12.5 + 4 * 7.25', 66.5],
  ])('%s = %d', (expression, expected) => {
    expect(evaluate(expression)).toBeCloseTo(expected, 12);
  });

  it.each([
    ['', /empty expression/],
    ['1 +', /unexpected end/],
    ['(1 + 2', /expected "\)"/],
    ['1 2', /unexpected "2" at position 3/],
    ['1 / 0', /division by zero/],
    ['5 % 0', /division by zero/],
    ['sqrt(-1)', /not a finite number/],
    ['10 ^ 400', /not a finite number/],
    ['foo(1)', /unknown name "foo"/],
    ['round(1, 2, 3)', /takes 1-2 argument/],
    ['process.exit(1)', /unexpected character "\."/],
    ['constructor.constructor("return 1")()', /unknown name|unexpected/],
    ['"a" + 1', /unexpected character/],
    ['1'.repeat(501), /longer than 500/],
  ])('rejects %j with a clear error', (expression, message) => {
    expect(() => evaluate(expression)).toThrow(CalculatorError);
    expect(() => evaluate(expression)).toThrow(message);
  });

  it('agrees with direct arithmetic on random expression trees', () => {
    fc.assert(
      fc.property(tree, (t) => {
        const expected = value(t);
        fc.pre(Number.isFinite(expected) && Math.abs(expected) < 1e15);
        expect(evaluate(text(t))).toBe(expected);
      }),
      { numRuns: 300 },
    );
  });
});
