/**
 * Puzzles with exactly one solution: a random full grid, then cells blanked in random order, keeping a
 * blank only if the puzzle stays uniquely solvable, until the asked number of blanks is reached.
 */
import type { SeededRandom } from '../random.ts';
import { formatGrid, type Size } from './grid.ts';
import { solve } from './solver.ts';

/** Fresh full grids tried before giving up on a blank count that is too high for the size. */
const MAX_GRIDS = 20;

export function generatePuzzle(size: Size, blanks: number, random: SeededRandom): string {
  const n = size * size;
  if (!Number.isInteger(blanks) || blanks < 1 || blanks >= n) throw new RangeError(`blanks must be 1-${n - 1} for a ${size}×${size} grid, got ${blanks}`);
  for (let attempt = 0; attempt < MAX_GRIDS; attempt++) {
    const full = solve(new Array<number>(n).fill(0), size, 1, (k) => random.int(k)).solution;
    if (!full) throw new Error('unreachable: an empty grid always has a solution');
    const cells = full.slice();
    let removed = 0;
    for (const i of random.shuffle(Array.from({ length: n }, (_, k) => k))) {
      if (removed === blanks) break;
      const keep = cells[i];
      cells[i] = 0;
      if (solve(cells, size, 2).count === 1) removed++;
      else cells[i] = keep;
    }
    if (removed === blanks) return formatGrid(cells);
  }
  throw new Error(`could not blank ${blanks} cells of a ${size}×${size} grid and keep the solution unique; use fewer blanks`);
}
