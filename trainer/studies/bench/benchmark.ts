/**
 * What a benchmark module is: a zod schema of its options (defaults included, so a caller with no flags
 * gets the documented run) and `run`, which measures and resolves to the result its `--json` prints.
 */
import type { z } from 'zod';

/** Progress for a person; the CLI shows it on stderr unless --json, `bench all` drops it. */
export type Log = (message: string) => void;

export interface Benchmark<S extends z.ZodType = z.ZodType, R = unknown> {
  options: S;
  run(options: z.output<S>, log: Log): Promise<R>;
}
