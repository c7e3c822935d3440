/** Sudoku as an EnvironmentDefinition: tasks, episodes, sampling and the scripted policies. */
import type { EnvironmentDefinition } from '../environment.ts';
import { scriptedPolicy, seededPolicy } from '../policies/scripted.ts';
import { sampleSplit } from '../task-sampler.ts';
import { formatPlacement } from './action.ts';
import { generatePuzzle } from './generator.ts';
import { nextCell, parseGrid } from './grid.ts';
import { solve } from './solver.ts';
import { SudokuEnvironment } from './environment.ts';
import { DEFAULT_BLANKS, SudokuOptions, SudokuTask } from './task.ts';

/**
 * The solution's moves: in reading order for the board view; in next-cell order (the blank that sees the
 * most digits first, grid.ts nextCell) for the next-cell view, which names that cell, and for the grid
 * view, where it is the order a careful player would fill a board in.
 */
function solutionMoves(task: SudokuTask, options: SudokuOptions): string[] {
  const cells = parseGrid(task.puzzle, task.size);
  const { solution } = solve(cells, task.size, 1);
  if (!solution) throw new Error('sudoku task has no solution');
  const moves: string[] = [];
  const place = (i: number) => {
    moves.push(formatPlacement({ row: Math.floor(i / task.size) + 1, col: (i % task.size) + 1, digit: solution[i] }));
    cells[i] = solution[i];
  };
  if (options.observation !== 'board') for (let i = nextCell(cells, task.size); i !== null; i = nextCell(cells, task.size)) place(i);
  else cells.forEach((d, i) => d === 0 && place(i));
  return moves;
}

export const sudoku: EnvironmentDefinition<SudokuTask, SudokuOptions> = {
  name: 'sudoku',
  taskSchema: SudokuTask,
  optionsSchema: SudokuOptions,
  async create(task, options) {
    return new SudokuEnvironment(task, options);
  },
  sampleTasks(split, n, seed, options) {
    const size = options.size;
    const blanks = options.blanks ?? DEFAULT_BLANKS[size];
    return sampleSplit(
      { idPrefix: `sudoku-${size}x${size}-b${blanks}`, generate: (random) => ({ puzzle: generatePuzzle(size, blanks, random), size }) },
      split,
      n,
      seed,
    );
  },
  oracle(task, options) {
    return scriptedPolicy(solutionMoves(task, options), 'the sudoku oracle');
  },
  random(task, _options, seed) {
    // Legal moves only: a random digit into a random cell that this policy has not filled yet.
    const open = parseGrid(task.puzzle, task.size).flatMap((d, i) => (d === 0 ? [i] : []));
    return seededPolicy(seed, (random) => {
      if (open.length === 0) return 'place 1 1 1';
      const i = open.splice(random.int(open.length), 1)[0];
      return formatPlacement({ row: Math.floor(i / task.size) + 1, col: (i % task.size) + 1, digit: random.range(1, task.size) });
    });
  },
};
