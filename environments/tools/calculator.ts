/**
 * A safe arithmetic evaluator for the calculator tool: a recursive-descent parser over numbers,
 * + - * / % ^ (also **), parentheses, unary signs, the constants pi and e and a few functions. It never
 * reaches `eval` or `Function`, so an expression can only ever compute a number.
 *
 *   expr  := term (('+' | '-') term)*
 *   term  := unary (('*' | '/' | '%') unary)*
 *   unary := ('+' | '-') unary | power
 *   power := atom (('^' | '**') unary)?          (right-associative: 2^3^2 = 2^9)
 *   atom  := number | constant | name '(' expr (',' expr)* ')' | '(' expr ')'
 */
const MAX_LENGTH = 500;

const FUNCTIONS: Record<string, { arity: [number, number]; fn: (...args: number[]) => number }> = {
  abs: { arity: [1, 1], fn: Math.abs },
  sqrt: { arity: [1, 1], fn: Math.sqrt },
  floor: { arity: [1, 1], fn: Math.floor },
  ceil: { arity: [1, 1], fn: Math.ceil },
  round: {
    arity: [1, 2],
    fn: (x, digits = 0) => {
      const f = 10 ** digits;
      return Math.round(x * f) / f;
    },
  },
  min: { arity: [1, 64], fn: Math.min },
  max: { arity: [1, 64], fn: Math.max },
};
const CONSTANTS: Record<string, number> = { pi: Math.PI, e: Math.E };

export class CalculatorError extends Error {}

type Token = { type: 'number'; value: number; at: number } | { type: 'name'; value: string; at: number } | { type: 'op'; value: string; at: number };

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  const re = /\s*(?:(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_][A-Za-z_0-9]*)|(\*\*|[-+*/%^(),]))/y;
  let at = 0;
  while (at < source.length) {
    if (/^\s*$/.test(source.slice(at))) break;
    re.lastIndex = at;
    const m = re.exec(source);
    if (!m) throw new CalculatorError(`unexpected character ${JSON.stringify(source.slice(at).trimStart()[0])} at position ${at + 1}`);
    const start = at + m[0].length - (m[1] ?? m[2] ?? m[3]).length;
    if (m[1] !== undefined) tokens.push({ type: 'number', value: Number(m[1]), at: start });
    else if (m[2] !== undefined) tokens.push({ type: 'name', value: m[2].toLowerCase(), at: start });
    else tokens.push({ type: 'op', value: m[3], at: start });
    at = re.lastIndex;
  }
  return tokens;
}

export function evaluate(expression: string): number {
  if (expression.length > MAX_LENGTH) throw new CalculatorError(`expression is longer than ${MAX_LENGTH} characters`);
  const tokens = tokenize(expression);
  if (tokens.length === 0) throw new CalculatorError('empty expression');
  let i = 0;
  const peek = (): Token | undefined => tokens[i];
  const isOp = (value: string) => peek()?.type === 'op' && peek()?.value === value;
  const expect = (value: string) => {
    if (!isOp(value)) throw new CalculatorError(`expected "${value}" ${where()}`);
    i++;
  };
  const where = () => (peek() ? `at position ${peek()!.at + 1}` : 'at the end');

  const expr = (): number => {
    let v = term();
    while (isOp('+') || isOp('-')) v = tokens[i++].value === '+' ? v + term() : v - term();
    return v;
  };
  const term = (): number => {
    let v = unary();
    while (isOp('*') || isOp('/') || isOp('%')) {
      const op = tokens[i++].value;
      const r = unary();
      if ((op === '/' || op === '%') && r === 0) throw new CalculatorError('division by zero');
      v = op === '*' ? v * r : op === '/' ? v / r : v % r;
    }
    return v;
  };
  const unary = (): number => {
    if (isOp('-')) return i++, -unary();
    if (isOp('+')) return i++, unary();
    return power();
  };
  const power = (): number => {
    const base = atom();
    if (isOp('^') || isOp('**')) {
      i++;
      return base ** unary();
    }
    return base;
  };
  const atom = (): number => {
    const t = peek();
    if (!t) throw new CalculatorError('unexpected end of expression');
    if (t.type === 'number') return i++, t.value;
    if (t.type === 'name') {
      i++;
      if (t.value in CONSTANTS && !isOp('(')) return CONSTANTS[t.value];
      const f = FUNCTIONS[t.value];
      if (!f) throw new CalculatorError(`unknown name "${t.value}" (functions: ${Object.keys(FUNCTIONS).join(', ')}; constants: pi, e)`);
      expect('(');
      const args = [expr()];
      while (isOp(',')) i++, args.push(expr());
      expect(')');
      if (args.length < f.arity[0] || args.length > f.arity[1]) throw new CalculatorError(`${t.value}() takes ${f.arity[0] === f.arity[1] ? f.arity[0] : `${f.arity[0]}-${f.arity[1]}`} argument(s), got ${args.length}`);
      return f.fn(...args);
    }
    if (t.value === '(') {
      i++;
      const v = expr();
      expect(')');
      return v;
    }
    throw new CalculatorError(`unexpected "${t.value}" ${where()}`);
  };

  const value = expr();
  if (i < tokens.length) throw new CalculatorError(`unexpected "${String(tokens[i].value)}" ${where()}`);
  if (!Number.isFinite(value)) throw new CalculatorError('the result is not a finite number');
  return value;
}
