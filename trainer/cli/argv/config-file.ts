/** `--config FILE`: a config read from JSON and checked by its schema, as the commands that take one read it. */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { RunConfig } from '../../../shared/schemas/index.ts';
import { UsageError } from './usage-error.ts';

/** A config of `schema` from a JSON file; a bad one is a UsageError naming `what` and every failing field path. */
export function readJsonConfig<S extends z.ZodType>(path: string, schema: S, what: string): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new UsageError(`--config: cannot read ${path}: ${(err as Error).message}`);
  }
  const r = schema.safeParse(json);
  if (!r.success) throw new UsageError(`--config: ${path} is not a valid ${what}:\n${z.prettifyError(r.error)}`);
  return r.data;
}

/** A run config (`esopt train`, `esopt runs start`). */
export function readConfigFile(path: string): RunConfig {
  return readJsonConfig(path, RunConfig, 'run config');
}
