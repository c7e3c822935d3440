/**
 * The horizon experiment's config: one ES run config (model, population, σ, α, tasks per iteration,
 * iterations, evaluation tasks), the horizons it is repeated at (sudoku blanks = moves, with slack 0), the
 * seeds (ES noise, GRPO sampling, random-search draws), and GRPO's own options (G = the ES population keeps
 * the episode budget equal). Each cell evaluates θ_0 and θ_final only (run.evalInterval and
 * checkpointInterval are set to the iterations).
 */
import { z } from 'zod';
import { RunConfig } from '../../../shared/schemas/index.ts';
import { GrpoOptions } from '../grpo/grpo.ts';

export const HorizonExperimentConfig = z
  .object({
    name: z.string().min(1),
    run: RunConfig,
    horizons: z.array(z.number().int().min(1).max(80)).min(1),
    seeds: z.array(z.number().int().min(0)).min(1),
    grpo: GrpoOptions,
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.run.environment.name !== 'sudoku') ctx.addIssue({ code: 'custom', path: ['run', 'environment', 'name'], message: 'the horizon experiment varies sudoku blanks; use the sudoku environment' });
    if (c.grpo.group !== c.run.es.population) ctx.addIssue({ code: 'custom', path: ['grpo', 'group'], message: `GRPO's group must equal the ES population (${c.run.es.population}) so both spend the same episodes` });
  });
export type HorizonExperimentConfig = z.infer<typeof HorizonExperimentConfig>;

/** The run config at horizon H: H blanks, every move a placement, no slack. */
export function runConfigAt(c: HorizonExperimentConfig, horizon: number, seed: number): RunConfig {
  const options: Record<string, unknown> = { ...(c.run.environment.options as Record<string, unknown>), blanks: horizon, slack: 0 };
  delete options.horizon;
  const iterations = c.run.iterations;
  // θ_0 and θ_final are what the table compares: evaluated at 0 and at the end only, checkpointed at the end.
  return RunConfig.parse({ ...c.run, name: `${c.name}-h${horizon}-s${seed}`, seed, evalInterval: iterations, checkpointInterval: iterations, environment: { ...c.run.environment, options } });
}
