/** The heuristic-design task and options schemas. */
import { z } from 'zod';
import { Seed } from '../../shared/schemas/index.ts';

export const HeuristicProblemName = z.enum(['bin-packing', 'tsp']);
export type HeuristicProblemName = z.infer<typeof HeuristicProblemName>;

export const HeuristicTask = z
  .object({
    problem: HeuristicProblemName,
    /** Seeds the test instances the submissions are scored on. */
    seed: Seed,
  })
  .strict();
export type HeuristicTask = z.infer<typeof HeuristicTask>;

export const HeuristicOptions = z
  .object({
    /** Problems that sampled tasks draw from. */
    problems: z.array(HeuristicProblemName).min(1).default(['bin-packing', 'tsp']),
    /** Submissions allowed per episode (the horizon). */
    submissions: z.number().int().min(1).max(20).default(3),
    /** Test instances each submission is scored on. */
    instances: z.number().int().min(1).max(50).default(4),
    memoryMb: z.number().int().min(8).max(512).default(32),
    perCallMs: z.number().int().min(1).max(10_000).default(100),
    /** Time budget of one submission: its top-level code and all its calls. */
    totalMs: z.number().int().min(10).max(120_000).default(5_000),
  })
  .strict();
export type HeuristicOptions = z.infer<typeof HeuristicOptions>;
