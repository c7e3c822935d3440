/**
 * Request bodies for the fuzz suites: random JSON, broken JSON text, and near-valid bodies — a valid
 * body with a few fields deleted, replaced by edge values or joined by unknown keys — so validation is
 * exercised past its first check, down to the environment's own option and task schemas.
 */
import fc from 'fast-check';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Values that sit on or past the edge of what a schema accepts. */
const EDGE_VALUES: Json[] = [
  null, true, false, 0, -1, 1, 0.5, -0.0, 1e308, -1e308, 2 ** 53, 4294967296, 1e-300, '', ' ', '0', 'NaN', 'Infinity',
  '../../etc/passwd', '/abs/path', 'a\\b', 'a\u0000b', 'é\u0301', '\u202e', '💥', 'x'.repeat(5000), [], {}, [null], { '': null },
  // JSON.parse makes "__proto__" an own key, as the server's parser does.
  JSON.parse('{"__proto__":{"polluted":true}}') as Json, { constructor: { prototype: {} } },
];

const edgeValue: fc.Arbitrary<Json> = fc.oneof(fc.constantFrom(...EDGE_VALUES), fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>);

type Path = Array<string | number>;

/** Every path into a JSON value, the root included. */
function pathsOf(value: Json, at: Path = []): Path[] {
  const out: Path[] = [at];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...pathsOf(v, [...at, i])));
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) out.push(...pathsOf(v, [...at, k]));
  return out;
}

type Mutation = { op: 'delete' | 'replace' | 'add-key' | 'wrap-array'; pick: number; value: Json; key: string };

const mutation: fc.Arbitrary<Mutation> = fc.record({
  op: fc.constantFrom('delete', 'replace', 'replace', 'add-key', 'wrap-array'),
  pick: fc.nat(),
  value: edgeValue,
  key: fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('__proto__', 'constructor', 'extra')),
});

/**
 * A fresh copy of a mutation's value. The edge values are shared constants: placed by reference, a later
 * mutation of the same body could add a key inside one of them, pointing back at itself (a cycle) and
 * changing the constant for every later run. A JSON round trip keeps "__proto__" an own key.
 */
function freshCopy(value: Json): Json {
  return JSON.parse(JSON.stringify(value)) as Json;
}

function applyMutation(root: Json, m: Mutation): Json {
  const value = freshCopy(m.value);
  const paths = pathsOf(root);
  const path = paths[m.pick % paths.length];
  if (path.length === 0) return m.op === 'wrap-array' ? [root] : m.op === 'replace' ? value : root;
  const parent = path.slice(0, -1).reduce<Json>((node, k) => (node as Record<string | number, Json>)[k], root) as Record<string | number, Json> | Json[];
  const last = path[path.length - 1];
  const slot = parent as Record<string | number, Json>;
  switch (m.op) {
    case 'delete':
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete slot[last];
      break;
    case 'replace':
      slot[last] = value;
      break;
    case 'wrap-array':
      slot[last] = [slot[last]];
      break;
    case 'add-key': {
      const target = slot[last];
      // defineProperty, so "__proto__" becomes an own key the way JSON.parse makes it on the server.
      if (target !== null && typeof target === 'object' && !Array.isArray(target)) Object.defineProperty(target, m.key, { value, enumerable: true, writable: true, configurable: true });
      else slot[last] = value;
    }
  }
  return root;
}

/** A valid body with 1-4 mutations. */
export function nearValid(valid: Json): fc.Arbitrary<Json> {
  return fc.array(mutation, { minLength: 1, maxLength: 4 }).map((ms) => ms.reduce((body, m) => applyMutation(body, m), structuredClone(valid)));
}

/** Text that is not the JSON of an object: garbage, truncated valid bodies, JSON of other shapes. */
function brokenText(valid: Json): fc.Arbitrary<string> {
  const text = JSON.stringify(valid);
  return fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.nat({ max: text.length - 1 }).map((n) => text.slice(0, n)),
    fc.constantFrom('', '{', '[', 'null', '"x"', '{"a":', '\u0000', '{}'.repeat(3), '{"__proto__":{"x":1}}', `${text}${text}`, `[${text}]`),
  );
}

/** What one fuzzed request carries: text sent as is, or a value sent as its JSON. */
export type FuzzBody = { kind: 'json'; value: Json } | { kind: 'text'; text: string };

/** Random JSON, near-valid bodies (half of all), and broken text. */
export function fuzzBody(valid: Json): fc.Arbitrary<FuzzBody> {
  return fc.oneof(
    { weight: 5, arbitrary: nearValid(valid).map((value): FuzzBody => ({ kind: 'json', value })) },
    { weight: 1, arbitrary: fc.constant<FuzzBody>({ kind: 'json', value: valid }) },
    { weight: 2, arbitrary: (fc.jsonValue({ maxDepth: 4 }) as fc.Arbitrary<Json>).map((value): FuzzBody => ({ kind: 'json', value })) },
    { weight: 2, arbitrary: brokenText(valid).map((text): FuzzBody => ({ kind: 'text', text })) },
  );
}

export function bodyText(body: FuzzBody): string {
  return body.kind === 'text' ? body.text : JSON.stringify(body.value);
}

/** Strings for path parameters: ids that are valid, ones that try to climb out, and anything at all. */
export function pathParam(existing: string[]): fc.Arbitrary<string> {
  return fc.oneof(
    // an id that exists half the time, so a route's body is fuzzed past its 404 often enough that one
    // which acts once per state (a resume) is still reached
    { weight: 3, arbitrary: fc.constantFrom(...existing) },
    fc.constantFrom('..', '../..', '..%2f..%2fetc', '%2e%2e', '.hidden', 'a/b', 'a\\b', 'a%00b', '%00', ' ', 'x'.repeat(65), 'é', '%E2%80%AE', '-1', '0', '1e3', 'NaN'),
    fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_-]{0,70}$/),
    fc.string({ maxLength: 40 }).map((s) => encodeURIComponent(s)),
    fc.nat().map(String),
  );
}
