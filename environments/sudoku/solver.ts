/**
 * A backtracking solver with bitmask candidates and the most-constrained-cell heuristic. It counts
 * solutions up to a limit, so "unique" is decided by finding a second one (limit 2) or proving none.
 */
import { boxOf, geometry, type Size } from './grid.ts';

export interface SolveResult {
  /** Solutions found, capped at the limit. */
  count: number;
  /** The first solution found, or null when there is none. */
  solution: number[] | null;
}

/**
 * Counts solutions of `cells` (0 = blank) up to `limit`. Givens that already conflict make it 0.
 * `random` (optional) shuffles the order digits are tried in, which turns the solver into a generator
 * of random full grids.
 */
export function solve(cells: readonly number[], size: Size, limit = 2, random?: (n: number) => number): SolveResult {
  const g = geometry(size);
  const n = size * size;
  const rows = new Int32Array(size);
  const cols = new Int32Array(size);
  const boxes = new Int32Array(size);
  const grid = Int8Array.from(cells);
  const box = new Int8Array(n);
  for (let i = 0; i < n; i++) {
    box[i] = boxOf(g, Math.floor(i / size), i % size);
    const d = grid[i];
    if (d === 0) continue;
    const bit = 1 << d;
    const r = Math.floor(i / size);
    const c = i % size;
    if ((rows[r] | cols[c] | boxes[box[i]]) & bit) return { count: 0, solution: null };
    rows[r] |= bit;
    cols[c] |= bit;
    boxes[box[i]] |= bit;
  }
  const all = ((1 << (size + 1)) - 1) & ~1;
  let count = 0;
  let solution: number[] | null = null;

  const search = (): boolean => {
    // The blank with fewest candidates: fails fast and keeps the tree small.
    let best = -1;
    let bestMask = 0;
    let bestCount = size + 1;
    for (let i = 0; i < n; i++) {
      if (grid[i] !== 0) continue;
      const r = Math.floor(i / size);
      const c = i % size;
      const mask = all & ~(rows[r] | cols[c] | boxes[box[i]]);
      const k = popcount(mask);
      if (k < bestCount) {
        best = i;
        bestMask = mask;
        bestCount = k;
        if (k <= 1) break;
      }
    }
    if (best === -1) {
      count++;
      if (solution === null) solution = Array.from(grid);
      return count >= limit;
    }
    if (bestCount === 0) return false;
    const digits: number[] = [];
    for (let d = 1; d <= size; d++) if (bestMask & (1 << d)) digits.push(d);
    if (random) {
      for (let i = digits.length - 1; i > 0; i--) {
        const j = random(i + 1);
        [digits[i], digits[j]] = [digits[j], digits[i]];
      }
    }
    const r = Math.floor(best / size);
    const c = best % size;
    for (const d of digits) {
      const bit = 1 << d;
      grid[best] = d;
      rows[r] |= bit;
      cols[c] |= bit;
      boxes[box[best]] |= bit;
      const stop = search();
      grid[best] = 0;
      rows[r] &= ~bit;
      cols[c] &= ~bit;
      boxes[box[best]] &= ~bit;
      if (stop) return true;
    }
    return false;
  };
  search();
  return { count, solution };
}

function popcount(x: number): number {
  let k = 0;
  for (let v = x; v !== 0; v &= v - 1) k++;
  return k;
}
