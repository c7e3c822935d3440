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

/**
 * The cell with the methods of an earlier file of the same cell that this run does not redo (a run with
 * `methods` adds its methods to cells another run wrote; the held-out tasks must be the same).
 */
export function mergeCell(earlier: HorizonCell | null, cell: HorizonCell): HorizonCell {
  if (!earlier) return cell;
  if (earlier.horizon !== cell.horizon || earlier.seed !== cell.seed || earlier.tasks.join() !== cell.tasks.join()) throw new Error(`the existing file of cell H${cell.horizon}/s${cell.seed} has other held-out tasks`);
  return {
    ...cell,
    solved: { ...earlier.solved, ...cell.solved },
    trainingEpisodes: { ...earlier.trainingEpisodes, ...cell.trainingEpisodes },
    curves: { ...earlier.curves, ...cell.curves },
    wallMs: { ...earlier.wallMs, ...cell.wallMs },
  };
}
