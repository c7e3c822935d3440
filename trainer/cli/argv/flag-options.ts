import type { z } from 'zod';
import type { Parsed } from './args.ts';
import { UsageError } from './usage-error.ts';

const camel = (flagName: string) => flagName.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/**
 * A module's options object from parsed flags: each flag `--foo-bar` fills option `fooBar` (or the name
 * `rename` gives it), the schema validates and fills defaults, and its first issue becomes a UsageError
 * naming the flag, worded as `flag()` words it.
 */
export function optionsFromFlags<S extends z.ZodType>(schema: S, values: Parsed['values'], flags: readonly string[], rename: Record<string, string> = {}): z.output<S> {
  const keyOf = (f: string) => rename[f] ?? camel(f);
  const raw: Record<string, unknown> = {};
  for (const f of flags) if (values[f] !== undefined) raw[keyOf(f)] = values[f];
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const flag = flags.find((f) => keyOf(f) === issue?.path[0]) ?? String(issue?.path[0] ?? '');
  const given = values[flag];
  if (given === undefined) throw new UsageError(`--${flag} is required`);
  throw new UsageError(`--${flag}: ${issue?.message ?? 'invalid'} (got ${JSON.stringify(given)})`);
}
