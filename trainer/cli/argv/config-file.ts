/** `--config FILE`: a run config read from JSON, as `esopt train` and `esopt runs start` take it. */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { RunConfig } from '../../../shared/schemas/index.ts';
import { UsageError } from './usage-error.ts';

/** A run config from a JSON file; a bad one is a UsageError listing every failing field path. */
export function readConfigFile(path: string): RunConfig {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new UsageError(`--config: cannot read ${path}: ${(err as Error).message}`);
  }
  const r = RunConfig.safeParse(json);
  if (!r.success) throw new UsageError(`--config: ${path} is not a valid run config:\n${z.prettifyError(r.error)}`);
  return r.data;
}
