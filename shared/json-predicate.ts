/**
 * A JSON predicate: a small declarative test over a JSON value, for success checks a user writes as data (an
 * MCP task's final answer, a web page's state). Pure: evaluating one reads the value and nothing else, in time
 * linear in the predicate's size times the value's (patterns search in linear time, shared/linear-pattern.ts).
 *
 * A predicate is one JSON object holding exactly one test, optionally applied at `path` (a JSON Pointer,
 * RFC 6901: "" is the whole value, "/items/0/name" a field of an element):
 *
 *   { "path": "/total", "equals": 42 }              deep equality (object key order does not matter)
 *   { "path": "/tags", "includes": "urgent" }       an array holding an element equal to the value
 *   { "path": "/name", "matches": "^Ada( |$)" }     a string the pattern occurs in (JavaScript syntax, no flags,
 *                                                   no lookarounds or \b: it must search in linear time)
 *   { "path": "/score", "gte": 0.5, "lt": 1 }       a finite number within every bound given (gt, gte, lt, lte)
 *   { "path": "/error", "exists": false }           whether the path leads to a value
 *   { "path": "/items", "type": "array" }           string, number, boolean, null, object or array
 *   { "all": [p, …] }  { "any": [p, …] }  { "not": p }   combinations; with a `path`, the parts test the value there
 *
 * A test on a path that leads nowhere is false (except `exists: false`); a test on a value of the wrong type
 * is false, never an error. Bounds (checked when parsing, before any recursion could run deep): depth 8,
 * 64 tests in all, 16 parts in an `all`/`any`, 4 KiB of JSON in an `equals`/`includes`, patterns of 512 characters.
 */
import { z } from 'zod';
import { linearPattern, PatternError, searchLinear } from './linear-pattern.ts';

export const MAX_PREDICATE_DEPTH = 8;
export const MAX_PREDICATE_TESTS = 64;
const MAX_PARTS = 16;
const MAX_OPERAND_BYTES = 4096;
const MAX_PATTERN = 512;

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonType = 'string' | 'number' | 'boolean' | 'null' | 'object' | 'array';

export interface JsonPredicate {
  path?: string;
  equals?: JsonValue;
  includes?: JsonValue;
  matches?: string;
  gt?: number;
  gte?: number;
  lt?: number;
  lte?: number;
  exists?: boolean;
  type?: JsonType;
  all?: JsonPredicate[];
  any?: JsonPredicate[];
  not?: JsonPredicate;
}

/** Which keys make up each kind of test; a predicate holds exactly one kind. */
const TESTS: Record<string, ReadonlyArray<keyof JsonPredicate>> = {
  equals: ['equals'],
  includes: ['includes'],
  matches: ['matches'],
  compare: ['gt', 'gte', 'lt', 'lte'],
  exists: ['exists'],
  type: ['type'],
  all: ['all'],
  any: ['any'],
  not: ['not'],
};

/** How deep a raw JSON value nests, counting up to `limit + 1` at most (so a hostile depth costs nothing). */
function depthOf(value: unknown, limit: number): number {
  if (value === null || typeof value !== 'object') return 0;
  if (limit < 0) return 1;
  let deepest = 0;
  for (const child of Object.values(value)) deepest = Math.max(deepest, depthOf(child, limit - 1));
  return deepest + 1;
}

const JsonPointer = z.string().max(1024).regex(/^(\/([^~]|~[01])*)*$/, 'must be a JSON Pointer: "" or "/key/0/…" (~0 for ~, ~1 for /)');

const Operand = z.json().refine((v) => JSON.stringify(v).length <= MAX_OPERAND_BYTES, `at most ${MAX_OPERAND_BYTES} bytes of JSON`);

const Pattern = z
  .string()
  .max(MAX_PATTERN)
  .superRefine((pattern, ctx) => {
    try {
      linearPattern(pattern);
    } catch (err) {
      if (!(err instanceof PatternError)) throw err;
      ctx.addIssue({ code: 'custom', message: `not a pattern that searches in linear time: ${err.message}` });
    }
  });

const Node: z.ZodType<JsonPredicate> = z.lazy(() =>
  z
    .object({
      path: JsonPointer.optional(),
      equals: Operand.optional(),
      includes: Operand.optional(),
      matches: Pattern.optional(),
      gt: z.number().finite().optional(),
      gte: z.number().finite().optional(),
      lt: z.number().finite().optional(),
      lte: z.number().finite().optional(),
      exists: z.boolean().optional(),
      type: z.enum(['string', 'number', 'boolean', 'null', 'object', 'array']).optional(),
      all: z.array(Node).min(1).max(MAX_PARTS).optional(),
      any: z.array(Node).min(1).max(MAX_PARTS).optional(),
      not: Node.optional(),
    })
    .strict()
    .superRefine((p, ctx) => {
      const kinds = Object.entries(TESTS).filter(([, keys]) => keys.some((k) => p[k] !== undefined)).map(([kind]) => kind);
      if (kinds.length !== 1) {
        ctx.addIssue({ code: 'custom', message: `a predicate holds exactly one test (equals, includes, matches, gt/gte/lt/lte, exists, type, all, any or not); this one has ${kinds.length === 0 ? 'none' : kinds.join(', ')}` });
      }
    }),
) as z.ZodType<JsonPredicate>;

function testCount(p: JsonPredicate): number {
  return 1 + [...(p.all ?? []), ...(p.any ?? []), ...(p.not ? [p.not] : [])].reduce((n, q) => n + testCount(q), 0);
}

/**
 * The schema of a predicate at a module boundary: bad input gets every failing field's path (`all.1.matches`).
 * The raw value's depth is checked before the recursive parse, so a deeply nested one is refused cheaply.
 */
export const JsonPredicate: z.ZodType<JsonPredicate> = z
  .unknown()
  .superRefine((raw, ctx) => {
    // A predicate level is two JSON levels deep at most (`{all: [{…}]}`); operands add their own few.
    const limit = 2 * MAX_PREDICATE_DEPTH + 4;
    if (depthOf(raw, limit) > limit) ctx.addIssue({ code: 'custom', message: `nests deeper than ${MAX_PREDICATE_DEPTH} predicates` });
  })
  .pipe(Node)
  .superRefine((p, ctx) => {
    const depth = (q: JsonPredicate): number => 1 + Math.max(0, ...[...(q.all ?? []), ...(q.any ?? []), ...(q.not ? [q.not] : [])].map(depth));
    if (depth(p) > MAX_PREDICATE_DEPTH) ctx.addIssue({ code: 'custom', message: `nests deeper than ${MAX_PREDICATE_DEPTH} predicates` });
    if (testCount(p) > MAX_PREDICATE_TESTS) ctx.addIssue({ code: 'custom', message: `holds more than ${MAX_PREDICATE_TESTS} tests` });
  }) as z.ZodType<JsonPredicate>;

const MISSING = Symbol('missing');

/** The value a JSON Pointer leads to in `value`, or MISSING (own keys only: "/__proto__" finds nothing). */
export function resolvePointer(value: unknown, pointer: string): unknown {
  if (pointer === '') return value;
  let at: unknown = value;
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(at)) {
      if (!/^(0|[1-9]\d*)$/.test(key) || Number(key) >= at.length) return MISSING;
      at = at[Number(key)];
    } else if (at !== null && typeof at === 'object' && Object.hasOwn(at, key)) {
      at = (at as Record<string, unknown>)[key];
    } else return MISSING;
  }
  return at;
}

function typeOf(value: unknown): JsonType | null {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
    case 'object':
      return typeof value as JsonType;
    default:
      return null;
  }
}

/** Deep equality of JSON values: numbers by value, arrays in order, objects by their own keys in any order. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  const ta = typeOf(a);
  if (ta !== typeOf(b) || (ta !== 'array' && ta !== 'object')) return false;
  if (ta === 'array') {
    const x = a as unknown[];
    const y = b as unknown[];
    return x.length === y.length && x.every((v, i) => jsonEqual(v, y[i]));
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = Object.keys(x);
  return keys.length === Object.keys(y).length && keys.every((k) => Object.hasOwn(y, k) && jsonEqual(x[k], y[k]));
}

/** Whether `value` passes the predicate (parse it with the `JsonPredicate` schema first). */
export function evaluatePredicate(predicate: JsonPredicate, value: unknown): boolean {
  const at = predicate.path === undefined ? value : resolvePointer(value, predicate.path);
  if (predicate.exists !== undefined) return (at !== MISSING) === predicate.exists;
  if (predicate.all) return predicate.all.every((p) => at !== MISSING && evaluatePredicate(p, at));
  if (predicate.any) return predicate.any.some((p) => at !== MISSING && evaluatePredicate(p, at));
  if (predicate.not) return at !== MISSING && !evaluatePredicate(predicate.not, at);
  if (at === MISSING) return false;
  if (predicate.equals !== undefined) return jsonEqual(at, predicate.equals);
  if (predicate.includes !== undefined) return Array.isArray(at) && at.some((v) => jsonEqual(v, predicate.includes));
  if (predicate.matches !== undefined) return typeof at === 'string' && searchLinear(predicate.matches, at);
  if (predicate.type !== undefined) return typeOf(at) === predicate.type;
  if (typeof at !== 'number' || !Number.isFinite(at)) return false;
  const { gt, gte, lt, lte } = predicate;
  return (gt === undefined || at > gt) && (gte === undefined || at >= gte) && (lt === undefined || at < lt) && (lte === undefined || at <= lte);
}
