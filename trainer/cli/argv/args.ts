import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { z } from 'zod';
import { UsageError } from './usage-error.ts';

export type FlagSpec = NonNullable<ParseArgsConfig['options']>;

/** Every command takes --json and --help; the rest is the command's own. */
const common = { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const satisfies FlagSpec;

export interface Parsed {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  json: boolean;
  help: boolean;
}

/** Strict flag parsing: an unknown flag or a missing value is a UsageError naming the flag. */
export function parseFlags(argv: string[], options: FlagSpec, allowPositionals = false): Parsed {
  try {
    const { values, positionals } = parseArgs({ args: argv, options: { ...common, ...options }, strict: true, allowPositionals });
    const v = values as Record<string, string | boolean | undefined>;
    return { values: v, positionals, json: v.json === true, help: v.help === true };
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/\. To specify a positional argument.*$/s, ''));
  }
}

/** Parse a flag's string value with a zod schema; the error names the flag. */
export function flag<T>(values: Parsed['values'], name: string, schema: z.ZodType<T>): T {
  const raw = values[name];
  if (raw === undefined && !schema.safeParse(undefined).success) throw new UsageError(`--${name} is required`);
  const r = schema.safeParse(raw);
  if (!r.success) {
    throw new UsageError(`--${name}: ${r.error.issues[0]?.message ?? 'invalid'} (got ${JSON.stringify(raw)})`);
  }
  return r.data;
}

/** Flags that each take a string value, validated later by a schema (flag-options.ts). */
export function stringFlags(...names: string[]): FlagSpec {
  return Object.fromEntries(names.map((n) => [n, { type: 'string' as const }]));
}
