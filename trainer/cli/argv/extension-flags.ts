/**
 * The flags that go on with a run further than it was to go (`esopt train --resume`, `esopt runs resume`):
 * its new length and any budget limit, `none` lifting one. They become a RunExtension (shared/run-extension.ts),
 * which the run's config is re-validated with.
 */
import { z } from 'zod';
import type { RunExtension } from '../../../shared/run-extension.ts';
import { flag, type FlagSpec, type Parsed } from './args.ts';

export const extensionFlags = {
  iterations: { type: 'string' },
  'max-cost-usd': { type: 'string' },
  'max-episodes': { type: 'string' },
  'max-hours': { type: 'string' },
} as const satisfies FlagSpec;

export const extensionUsage = '[--iterations N] [--max-cost-usd X] [--max-episodes N] [--max-hours H]';

/** A number as the flag's text; the range is RunConfig's to judge, with the field's path. */
const number = z.string().regex(/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/, 'is not a number').transform(Number);

/** The extension the flags ask for; null when none of them is given. */
export function extensionFromFlags(values: Parsed['values']): RunExtension | null {
  if (Object.keys(extensionFlags).every((name) => values[name] === undefined)) return null;
  const limit = (name: string) => (values[name] === undefined ? undefined : values[name] === 'none' ? null : flag(values, name, number));
  const budget = { maxCostUsd: limit('max-cost-usd'), maxEpisodes: limit('max-episodes'), maxHours: limit('max-hours') };
  const given = Object.fromEntries(Object.entries(budget).filter(([, v]) => v !== undefined));
  return {
    ...(values.iterations === undefined ? {} : { iterations: flag(values, 'iterations', number) }),
    ...(Object.keys(given).length ? { budget: given } : {}),
  };
}

/** The flag behind a field path of the extension, for messages a CLI user can act on. */
export function flagOfPath(path: string): string {
  const names: Record<string, string> = { iterations: '--iterations', 'budget.maxCostUsd': '--max-cost-usd', 'budget.maxEpisodes': '--max-episodes', 'budget.maxHours': '--max-hours' };
  return names[path] ? `${path} (${names[path]})` : path;
}
