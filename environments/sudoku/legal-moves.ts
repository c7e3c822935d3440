/**
 * The legal moves of a position: a digit into a blank cell that its row, column and box do not already
 * hold. A legal move can still be wrong (the puzzle has one solution), and a wrong one can leave a blank
 * with no legal digit: a dead end, which the `grid` setting ends the episode on.
 */
import { seenDigits, type Size } from './grid.ts';

export interface Move {
  /** Row-major cell index. */
  cell: number;
  digit: number;
}

/** The digits cell `i` may still take, ascending. */
export function candidates(cells: readonly number[], size: Size, i: number): number[] {
  const seen = new Set(seenDigits(cells, size, i));
  return Array.from({ length: size }, (_, d) => d + 1).filter((d) => !seen.has(d));
}

/** Every legal move, cells in reading order, digits ascending. */
export function legalMoves(cells: readonly number[], size: Size): Move[] {
  const out: Move[] = [];
  cells.forEach((d, i) => {
    if (d === 0) for (const digit of candidates(cells, size, i)) out.push({ cell: i, digit });
  });
  return out;
}

/** The first blank (reading order) with no legal digit, or null: a position with one is unsolvable. */
export function deadCell(cells: readonly number[], size: Size): number | null {
  for (let i = 0; i < cells.length; i++) if (cells[i] === 0 && candidates(cells, size, i).length === 0) return i;
  return null;
}
