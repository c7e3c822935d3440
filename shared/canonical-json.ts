/**
 * Canonical JSON as RFC 8785 (JCS) writes it, for hashes another program must be able to recompute: object
 * keys sorted by UTF-16 code units, no whitespace, strings and numbers as ECMAScript's JSON.stringify writes
 * them (which is what JCS prescribes). `undefined` object members are left out, as JSON.stringify does.
 */
import { createHash } from 'node:crypto';

export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new Error(`canonical JSON has no ${value}`);
    const text = JSON.stringify(value);
    if (text === undefined) throw new Error(`canonical JSON has no ${typeof value}`);
    return text;
  }
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  // Default sort compares UTF-16 code units, exactly JCS's order.
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/** The sha256 (64 lowercase hex digits) of a value's canonical JSON, UTF-8. */
export function canonicalSha256(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex');
}
