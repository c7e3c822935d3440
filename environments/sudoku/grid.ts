/**
 * Sudoku grids as flat row-major arrays of digits (0 = blank), for sizes 4, 6 and 9. A box is
 * boxRows × boxCols: 2×2 for 4×4, 2×3 for 6×6, 3×3 for 9×9.
 */
export type Size = 4 | 6 | 9;
export const SIZES: readonly Size[] = [4, 6, 9];

export interface Geometry {
  size: Size;
  boxRows: number;
  boxCols: number;
}

export function geometry(size: Size): Geometry {
  switch (size) {
    case 4:
      return { size, boxRows: 2, boxCols: 2 };
    case 6:
      return { size, boxRows: 2, boxCols: 3 };
    case 9:
      return { size, boxRows: 3, boxCols: 3 };
  }
}

export function boxOf(g: Geometry, row: number, col: number): number {
  return Math.floor(row / g.boxRows) * (g.size / g.boxCols) + Math.floor(col / g.boxCols);
}

/** Parses the task's row-major string ('.' for a blank); throws on a wrong length or character. */
export function parseGrid(puzzle: string, size: Size): number[] {
  if (puzzle.length !== size * size) throw new Error(`a ${size}×${size} puzzle has ${size * size} cells, got ${puzzle.length}`);
  return [...puzzle].map((ch, i) => {
    if (ch === '.') return 0;
    const d = ch.charCodeAt(0) - 48;
    if (d < 1 || d > size) {
      throw new Error(`cell ${i + 1} (row ${Math.floor(i / size) + 1}, column ${(i % size) + 1}) is ${JSON.stringify(ch)}: expected "." or a digit 1-${size}`);
    }
    return d;
  });
}

export function formatGrid(cells: readonly number[]): string {
  return cells.map((d) => (d === 0 ? '.' : String(d))).join('');
}

/** The board as text, with box separators and 1-based row and column numbers. */
export function renderBoard(cells: readonly number[], size: Size): string {
  const g = geometry(size);
  const header = `     ${Array.from({ length: size }, (_, c) => `${c + 1}${(c + 1) % g.boxCols === 0 && c + 1 < size ? ' |' : ''}`).join(' ')}`;
  const rule = `   ${'-'.repeat(header.length - 3)}`;
  const lines = [header, rule];
  for (let r = 0; r < size; r++) {
    const row = Array.from({ length: size }, (_, c) => {
      const d = cells[r * size + c];
      return `${d === 0 ? '.' : d}${(c + 1) % g.boxCols === 0 && c + 1 < size ? ' |' : ''}`;
    }).join(' ');
    lines.push(`${String(r + 1).padStart(2)} | ${row}`);
    if ((r + 1) % g.boxRows === 0 && r + 1 < size) lines.push(rule);
  }
  return lines.join('\n');
}

/** The digits already in the row, column and box of cell `i`, ascending. */
export function seenDigits(cells: readonly number[], size: Size, i: number): number[] {
  const g = geometry(size);
  const row = Math.floor(i / size);
  const col = i % size;
  const seen = new Set<number>();
  for (let j = 0; j < cells.length; j++) {
    const r = Math.floor(j / size);
    const c = j % size;
    if (cells[j] !== 0 && (r === row || c === col || boxOf(g, r, c) === boxOf(g, row, col))) seen.add(cells[j]);
  }
  return [...seen].sort((a, b) => a - b);
}

/** The blank a careful player fills next: the one that sees the most digits (fewest candidates), first in reading order on ties. */
export function nextCell(cells: readonly number[], size: Size): number | null {
  let best: number | null = null;
  let bestSeen = -1;
  for (let i = 0; i < cells.length; i++) {
    if (cells[i] !== 0) continue;
    const seen = seenDigits(cells, size, i).length;
    if (seen > bestSeen) [best, bestSeen] = [i, seen];
  }
  return best;
}

/**
 * The next cell and the digits its row, column and box already hold ("2 3: 1 . 3 4"), instead of the
 * board: the bookkeeping a player does in pencil, on one line, so a small model needs neither a long
 * context nor to address the grid. Which digit goes there is still the player's to work out.
 */
export function renderNextCell(cells: readonly number[], size: Size): string {
  const i = nextCell(cells, size);
  if (i === null) return 'No blank cells.';
  // Each digit in its own slot ("1 2 . 4": 3 is not seen), so every digit sits at a fixed place on the line.
  const seen = new Set(seenDigits(cells, size, i));
  const slots = Array.from({ length: size }, (_, d) => (seen.has(d + 1) ? String(d + 1) : '.')).join(' ');
  return `Next cell (row col: digits seen):\n${Math.floor(i / size) + 1} ${(i % size) + 1}: ${slots}`;
}

/** The board as one line of digits per row ("." for a blank): the `grid` observation, short enough for a small model's context. */
export function renderCompactGrid(cells: readonly number[], size: Size): string {
  const rows = Array.from({ length: size }, (_, r) => formatGrid(cells.slice(r * size, (r + 1) * size)));
  return `Board:\n${rows.join('\n')}`;
}
