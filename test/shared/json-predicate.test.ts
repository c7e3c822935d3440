/** JSON predicates (shared/json-predicate.ts): parsing with field paths and bounds, and what each test answers. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { evaluatePredicate, JsonPredicate, jsonEqual, resolvePointer } from '../../shared/json-predicate.ts';

const order = { id: 'O1', total: 42.5, tags: ['gift', 'urgent'], customer: { name: 'Ada Lovelace', 'a/b': 1, '~k': 2 }, items: [{ sku: 'x', qty: 2 }, { sku: 'y', qty: 1 }], note: null };
const check = (predicate: unknown, value: unknown = order) => evaluatePredicate(JsonPredicate.parse(predicate), value);
const issues = (predicate: unknown) => {
  const r = JsonPredicate.safeParse(predicate);
  if (r.success) throw new Error('expected a refusal');
  return r.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
};

describe('evaluating a JSON predicate', () => {
  it('tests equality deeply, key order aside, at a JSON Pointer', () => {
    expect(check({ path: '/total', equals: 42.5 })).toBe(true);
    expect(check({ path: '/total', equals: '42.5' })).toBe(false);
    expect(check({ path: '/items/1', equals: { qty: 1, sku: 'y' } })).toBe(true);
    expect(check({ path: '/items/1', equals: { qty: 1, sku: 'y', extra: true } })).toBe(false);
    expect(check({ path: '/note', equals: null })).toBe(true);
    expect(check({ path: '/customer/a~1b', equals: 1 })).toBe(true);
    expect(check({ path: '/customer/~0k', equals: 2 })).toBe(true);
    expect(check({ equals: 'Ada' }, 'Ada')).toBe(true);
  });

  it('answers false for a path that leads nowhere, an own-key lookup only', () => {
    expect(check({ path: '/missing', equals: null })).toBe(false);
    expect(check({ path: '/items/2', exists: true })).toBe(false);
    expect(check({ path: '/items/01', exists: true })).toBe(false);
    expect(check({ path: '/id/length', exists: true })).toBe(false);
    expect(check({ path: '/customer/__proto__', exists: true })).toBe(false);
    expect(check({ path: '/customer/toString', exists: true })).toBe(false);
    expect(check({ path: '/missing', exists: false })).toBe(true);
    expect(check({ path: '/missing', not: { equals: 1 } })).toBe(false);
  });

  it('matches strings in linear time, compares finite numbers, checks types and membership', () => {
    expect(check({ path: '/customer/name', matches: '^Ada( |$)' })).toBe(true);
    expect(check({ path: '/customer/name', matches: '^Lovelace' })).toBe(false);
    expect(check({ path: '/total', matches: '42' })).toBe(false);
    expect(check({ path: '/total', gte: 42.5, lt: 43 })).toBe(true);
    expect(check({ path: '/total', gt: 42.5 })).toBe(false);
    expect(check({ path: '/id', lte: 100 })).toBe(false);
    expect(check({ path: '/items', type: 'array' })).toBe(true);
    expect(check({ path: '/customer', type: 'array' })).toBe(false);
    expect(check({ path: '/note', type: 'null' })).toBe(true);
    expect(check({ path: '/tags', includes: 'urgent' })).toBe(true);
    expect(check({ path: '/items', includes: { sku: 'x', qty: 2 } })).toBe(true);
    expect(check({ path: '/id', includes: 'O' })).toBe(false);
    // A catastrophic-backtracking pattern is answered at once on a long text.
    const started = performance.now();
    expect(check({ matches: '^([a-z]+)+!' }, 'a'.repeat(50_000))).toBe(false);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('combines with all, any and not, the parts relative to the path', () => {
    expect(check({ all: [{ path: '/total', gt: 40 }, { path: '/tags', includes: 'gift' }] })).toBe(true);
    expect(check({ all: [{ path: '/total', gt: 40 }, { path: '/tags', includes: 'none' }] })).toBe(false);
    expect(check({ any: [{ path: '/total', gt: 100 }, { path: '/id', equals: 'O1' }] })).toBe(true);
    expect(check({ not: { path: '/total', gt: 100 } })).toBe(true);
    expect(check({ path: '/items/0', all: [{ path: '/sku', equals: 'x' }, { path: '/qty', equals: 2 }] })).toBe(true);
  });
});

describe('parsing a JSON predicate', () => {
  it('refuses no test, two tests, unknown keys and bad pointers with the field path', () => {
    expect(issues({ path: '/a' })[0]!.message).toMatch(/exactly one test.*none/);
    expect(issues({ equals: 1, matches: 'x' })[0]!.message).toMatch(/equals, matches/);
    expect(issues({ equal: 1 }).some((i) => /equal/.test(i.message))).toBe(true);
    expect(issues({ path: 'a/b', equals: 1 })[0]).toMatchObject({ path: 'path' });
    expect(issues({ path: '/a~2', equals: 1 })[0]).toMatchObject({ path: 'path' });
    expect(issues({ all: [{ equals: 1 }, { gte: 'x' }] })[0]).toMatchObject({ path: 'all.1.gte' });
    expect(issues({ all: [] })[0]).toMatchObject({ path: 'all' });
  });

  it('refuses a pattern that cannot search in linear time, naming where it is', () => {
    expect(issues({ any: [{ equals: 1 }, { matches: '(?=a)b' }] })[0]).toMatchObject({ path: 'any.1.matches', message: expect.stringMatching(/linear time: lookarounds/) });
    expect(issues({ matches: 'a'.repeat(600) })[0]).toMatchObject({ path: 'matches' });
  });

  it('bounds depth, size and operands', () => {
    let deep: unknown = { equals: 1 };
    for (let i = 0; i < 8; i++) deep = { not: deep };
    expect(issues(deep)[0]!.message).toMatch(/deeper than 8/);
    let hostile: unknown = { equals: 1 };
    for (let i = 0; i < 100_000; i++) hostile = { not: hostile };
    expect(issues(hostile)[0]!.message).toMatch(/deeper than 8/);
    const wide = { all: Array.from({ length: 16 }, () => ({ any: Array.from({ length: 5 }, () => ({ equals: 1 })) })) };
    expect(issues(wide)[0]!.message).toMatch(/more than 64 tests/);
    expect(issues({ equals: 'x'.repeat(5000) })[0]).toMatchObject({ path: 'equals' });
    expect(JsonPredicate.safeParse({ not: { not: { equals: [1, { a: 2 }] } } }).success).toBe(true);
  });

  it('has a schema whose output re-parses (a predicate stored and read back is the same)', () => {
    const p = JsonPredicate.parse({ path: '/x', all: [{ gte: 1 }, { not: { equals: 3 } }] });
    expect(JsonPredicate.parse(JSON.parse(JSON.stringify(p)))).toEqual(p);
    expect(z.prettifyError(JsonPredicate.safeParse({ gt: 'x' }).error!)).toContain('gt');
  });
});

describe('pointer and equality helpers', () => {
  it('resolves the root and nested keys, and compares key order aside', () => {
    expect(resolvePointer(order, '')).toBe(order);
    expect(resolvePointer(order, '/items/0/sku')).toBe('x');
    expect(jsonEqual({ a: [1, { b: 2 }], c: 'x' }, { c: 'x', a: [1, { b: 2 }] })).toBe(true);
    expect(jsonEqual([1, 2], [2, 1])).toBe(false);
    expect(jsonEqual({}, [])).toBe(false);
  });
});
