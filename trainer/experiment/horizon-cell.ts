/**
 * One (H, seed) cell of the horizon experiment as written to `h{H}-s{seed}.json`: per method, which held-out
 * tasks it solved, its training episodes, its training curve and its wall time. The file is rewritten after
 * every method finishes, so a method absent from it had not finished when the run stopped.
 */
import { z } from 'zod';

export const METHODS = ['base', 'es', 'grpo', 'randomSearch'] as const;
export type Method = (typeof METHODS)[number];
export const TRAINED = ['es', 'grpo', 'randomSearch'] as const;
export type TrainedMethod = (typeof TRAINED)[number];

/** Training success after `episodes` training episodes: ES's members, GRPO's sampled rollouts, random search's best candidate so far. */
const CurvePoint = z.object({ episodes: z.number().int().min(0), successRate: z.number().min(0).max(1) });

const perMethod = <T extends z.ZodType>(t: T) => z.object({ base: t.optional(), es: t.optional(), grpo: t.optional(), randomSearch: t.optional() }).strict();
const perTrained = <T extends z.ZodType>(t: T) => z.object({ es: t.optional(), grpo: t.optional(), randomSearch: t.optional() }).strict();

export const HorizonCell = z
  .object({
    horizon: z.number().int().min(1),
    seed: z.number().int().min(0),
    /** The held-out task ids, the same for every method of the cell. */
    tasks: z.array(z.string()).min(1),
    /** Per held-out task: solved (reward ≥ threshold, no error). */
    solved: perMethod(z.array(z.boolean())),
    trainingEpisodes: perTrained(z.number().int().min(0)),
    curves: perTrained(z.array(CurvePoint)),
    wallMs: perTrained(z.number().min(0)),
  })
  .strict()
  .superRefine((c, ctx) => {
    for (const m of METHODS) {
      const s = c.solved[m];
      if (s && s.length !== c.tasks.length) ctx.addIssue({ code: 'custom', path: ['solved', m], message: `${s.length} results for ${c.tasks.length} held-out tasks` });
    }
  });
export type HorizonCell = z.infer<typeof HorizonCell>;
