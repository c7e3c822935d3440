import { readFileSync } from 'node:fs';
import { UsageError } from './usage-error.ts';

/** A flag whose value is JSON, given inline or as `@file`; bad JSON is a UsageError naming the flag. */
export function jsonFlag(values: Record<string, string | boolean | undefined>, name: string, fallback?: unknown): unknown {
  const raw = values[name];
  if (raw === undefined || raw === true || raw === false) {
    if (fallback !== undefined) return fallback;
    throw new UsageError(`--${name} is required (JSON, or @file)`);
  }
  let text = raw;
  if (raw.startsWith('@')) {
    try {
      text = readFileSync(raw.slice(1), 'utf8');
    } catch (err) {
      throw new UsageError(`--${name}: cannot read ${raw.slice(1)}: ${(err as Error).message}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--${name}: not valid JSON: ${(err as Error).message}`);
  }
}
