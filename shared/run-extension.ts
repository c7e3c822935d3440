/**
 * Going on with a run that ended — stopped at its budget or on request, failed, or finished — with more
 * iterations or a larger budget: the request (`RunExtension`, the body of POST /runs/{id}/resume and the
 * flags of `esopt train --resume`) and the run's config with it applied, re-validated whole by RunConfig.
 */
import { z } from 'zod';
import { RunConfig } from './schemas/run-config.ts';
import { fieldIssues, type FieldIssue } from './validation.ts';

/** A limit to set, or null to lift it. */
const limit = <S extends z.ZodType>(s: S) => s.nullable().optional();

export const RunExtension = z
  .object({
    /** The run's new length in all (not iterations added); at least the iterations its log has committed. */
    iterations: z.number().int().min(1).max(1_000_000).optional(),
    /** Limits replaced one by one; a limit not named is kept, one given as null is lifted. */
    budget: z
      .object({
        maxCostUsd: limit(z.number().positive().finite()),
        maxEpisodes: limit(z.number().int().min(1)),
        maxHours: limit(z.number().positive().finite()),
      })
      .strict()
      .optional(),
  })
  .strict()
  .meta({ id: 'RunExtension' });
export type RunExtension = z.infer<typeof RunExtension>;

export type Extended = { ok: true; config: RunConfig; changes: string[] } | { ok: false; issues: FieldIssue[] };

/**
 * `config` with `extension` applied, for a run whose log has committed `completed` updates. Refused, with
 * the field path: a length below `completed`, and any value RunConfig refuses.
 */
export function extendRunConfig(config: RunConfig, extension: RunExtension, completed: number): Extended {
  if (extension.iterations !== undefined && extension.iterations < completed) {
    return { ok: false, issues: [{ path: 'iterations', message: `is ${extension.iterations}, below the ${completed} iterations the run has completed` }] };
  }
  const budget: Record<string, number> = { ...config.budget };
  for (const [name, value] of Object.entries(extension.budget ?? {})) {
    if (value === null) delete budget[name];
    else if (value !== undefined) budget[name] = value;
  }
  const parsed = RunConfig.safeParse({ ...config, iterations: extension.iterations ?? config.iterations, budget });
  if (!parsed.success) return { ok: false, issues: fieldIssues(parsed.error) };
  const next = parsed.data;
  const changes: string[] = [];
  if (next.iterations !== config.iterations) changes.push(`iterations ${config.iterations} → ${next.iterations}`);
  for (const name of ['maxCostUsd', 'maxEpisodes', 'maxHours'] as const) {
    const [before, after] = [config.budget[name], next.budget[name]];
    if (before !== after) changes.push(`budget.${name} ${before ?? 'none'} → ${after ?? 'none'}`);
  }
  return { ok: true, config: next, changes };
}
