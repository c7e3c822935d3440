/** The sudoku task and options schemas. A task's solution is computed, never supplied. */
import { z } from 'zod';
import { parseGrid, type Size } from './grid.ts';
import { solve } from './solver.ts';

export const SudokuSize = z.union([z.literal(4), z.literal(6), z.literal(9)]);

/** Blanks used when the options do not say: 15 on 9×9 is the long-horizon setting (15 correct moves). */
export const DEFAULT_BLANKS: Record<Size, number> = { 4: 6, 6: 12, 9: 15 };

export const SudokuTask = z
  .object({
    puzzle: z.string().describe('row-major cells, "." for a blank'),
    size: SudokuSize,
  })
  .strict()
  .superRefine((task, ctx) => {
    let cells: number[];
    try {
      cells = parseGrid(task.puzzle, task.size);
    } catch (err) {
      ctx.addIssue({ code: 'custom', path: ['puzzle'], message: (err as Error).message });
      return;
    }
    if (!cells.includes(0)) {
      ctx.addIssue({ code: 'custom', path: ['puzzle'], message: 'puzzle has no blanks: there is nothing to play' });
      return;
    }
    const { count } = solve(cells, task.size, 2);
    if (count === 0) ctx.addIssue({ code: 'custom', path: ['puzzle'], message: 'puzzle has no solution' });
    if (count > 1) ctx.addIssue({ code: 'custom', path: ['puzzle'], message: 'puzzle has more than one solution; a task needs exactly one' });
  });
export type SudokuTask = z.infer<typeof SudokuTask>;

export const SudokuOptions = z
  .object({
    /** Grid size of sampled tasks (a given task carries its own size). */
    size: SudokuSize.default(9),
    /** Blanks in sampled tasks; DEFAULT_BLANKS[size] when absent. */
    blanks: z.number().int().min(1).max(80).optional(),
    /** What an invalid move does: end the episode (reward as it stands) or only waste a step. */
    invalidMove: z.enum(['end', 'waste']).default('end'),
    /** Steps beyond the number of blanks; the horizon is blanks + slack unless `horizon` is set. */
    slack: z.number().int().min(0).max(1000).default(2),
    horizon: z.number().int().min(1).max(10_000).optional(),
    /** Reward the fraction of blanks filled correctly instead of 1/0 for a solved grid. */
    shapedReward: z.boolean().default(false),
    /**
     * Ask policies to reply with exactly `place <row> <col> <digit>` naming a blank cell (a regex action
     * constraint over the cells still blank): the format and the legal cells are forced, the digit is
     * the policy's to choose — which is the puzzle.
     */
    constrainActions: z.boolean().default(false),
    /**
     * What an observation shows besides the move status: the board, or only the next cell — the blank
     * that sees the most digits — with the digits its row, column and box hold (grid.ts renderNextCell),
     * which fits a small model's context. With `constrainActions`, replies must then fill that cell.
     *
     * `grid`: the whole board, one line of digits per row, and with `constrainActions` every legal move
     * (any blank cell, any digit its row, column and box do not hold) is allowed, so each turn is a real
     * choice of cell and digit; a move that leaves some blank without a legal digit ends the episode
     * (a dead end, reward 0). This is the long-horizon setting of docs/ENVIRONMENTS.md.
     */
    observation: z.enum(['board', 'next-cell', 'grid']).default('board'),
  })
  .strict();
export type SudokuOptions = z.infer<typeof SudokuOptions>;
