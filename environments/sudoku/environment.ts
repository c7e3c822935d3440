/** One sudoku episode: the board, the move rules, the horizon and the (terminal) reward. */
import type { ActionConstraint, PolicyReply } from '../../shared/ports/policy.ts';
import type { Environment, StepResult } from '../environment.ts';
import { parsePlacement } from './action.ts';
import { nextCell, parseGrid, renderBoard, renderCompactGrid, renderNextCell, type Size } from './grid.ts';
import { deadCell, legalMoves } from './legal-moves.ts';
import { solve } from './solver.ts';
import type { SudokuOptions, SudokuTask } from './task.ts';

export function sudokuSystemPrompt(size: Size): string {
  const box = size === 4 ? '2×2' : size === 6 ? '2×3 (2 rows by 3 columns)' : '3×3';
  return [
    `You are solving a ${size}×${size} sudoku. Fill every blank (".") so that each row, each column and each ${box} box holds the digits 1-${size} exactly once.`,
    'Each turn, answer with exactly one move in the form:',
    'place <row> <col> <digit>',
    `Rows and columns are numbered 1-${size} from the top left. Example: "place 1 3 4" puts 4 in row 1, column 3.`,
    'You may only fill blank cells: changing a given or an already placed digit, a number out of range or a reply without a move is an invalid move.',
  ].join('\n');
}

export class SudokuEnvironment implements Environment {
  readonly horizon: number;
  readonly systemPrompt: string;
  private readonly size: Size;
  private readonly initial: number[];
  private readonly solution: number[];
  private readonly blanks: number;
  private cells: number[] = [];
  private moves = 0;
  private done = true;
  /** "4 at row 1, column 3": what the last valid move did, for the next observation. */
  private lastPlaced = '';

  constructor(
    task: SudokuTask,
    private readonly options: SudokuOptions,
  ) {
    this.size = task.size;
    this.initial = parseGrid(task.puzzle, task.size);
    const { count, solution } = solve(this.initial, task.size, 2);
    if (count !== 1 || !solution) throw new Error(`sudoku task must have exactly one solution (found ${count})`);
    this.solution = solution;
    this.blanks = this.initial.filter((d) => d === 0).length;
    this.horizon = options.horizon ?? this.blanks + options.slack;
    this.systemPrompt = sudokuSystemPrompt(task.size);
  }

  async reset(_seed: number): Promise<string> {
    // Sudoku is deterministic: the seed has nothing to choose.
    this.cells = this.initial.slice();
    this.moves = 0;
    this.done = false;
    return this.observation('New puzzle.');
  }

  actionConstraint(): ActionConstraint | undefined {
    if (!this.options.constrainActions) return undefined;
    const n = this.size;
    if (this.options.observation === 'grid') {
      // One alternative per blank cell with a legal digit: "place (1 2 [34]|2 5 [1])".
      const byCell = new Map<number, number[]>();
      for (const m of legalMoves(this.cells, n)) byCell.set(m.cell, [...(byCell.get(m.cell) ?? []), m.digit]);
      const alternatives = [...byCell].map(([i, digits]) => `${Math.floor(i / n) + 1} ${(i % n) + 1} [${digits.join('')}]`);
      return { regex: `place (${alternatives.join('|')})` };
    }
    const next = this.options.observation === 'next-cell' ? nextCell(this.cells, n) : null;
    const blanks: string[] = [];
    this.cells.forEach((d, i) => {
      if (d === 0 && (next === null || i === next)) blanks.push(`${Math.floor(i / n) + 1} ${(i % n) + 1}`);
    });
    return { regex: `place (${blanks.join('|')}) [1-${n}]` };
  }

  async step(action: PolicyReply): Promise<StepResult> {
    if (this.done) throw new Error('step() after the episode ended; call reset() first');
    this.moves++;
    const invalid = this.apply(action.text);
    const full = !this.cells.includes(0);
    const outOfMoves = this.moves >= this.horizon;
    // In the grid setting a blank with no legal digit left is a dead end: the grid cannot be completed.
    const dead = this.options.observation === 'grid' && !full ? deadCell(this.cells, this.size) : null;
    const ended = full || outOfMoves || dead !== null || (invalid !== null && this.options.invalidMove === 'end');
    const info = { valid: invalid === null, ...(invalid ? { reason: invalid } : {}), moves: this.moves, solved: this.isSolved() };
    let status: string;
    if (invalid) status = `Invalid move: ${invalid}.${ended ? '' : ' That move was wasted.'}`;
    else status = `Placed ${this.lastPlaced}.`;
    if (!ended) return { observation: this.observation(status), done: false, info };
    this.done = true;
    const reason = full
      ? info.solved
        ? 'The grid is solved.'
        : 'The grid is full but not correct.'
      : dead !== null
        ? `Dead end: no digit fits row ${Math.floor(dead / this.size) + 1}, column ${(dead % this.size) + 1}.`
        : outOfMoves
          ? 'No moves left.'
          : 'The episode ends on an invalid move.';
    return { observation: this.observation(`${status} ${reason}`), done: true, reward: this.reward(), info };
  }

  async close(): Promise<void> {}

  /** Applies a move; returns why it is invalid, or null. */
  private apply(text: string): string | null {
    const p = parsePlacement(text);
    if (!p) return 'no "place <row> <col> <digit>" action found';
    const n = this.size;
    if (p.row < 1 || p.row > n) return `row ${p.row} is out of range 1-${n}`;
    if (p.col < 1 || p.col > n) return `column ${p.col} is out of range 1-${n}`;
    if (p.digit < 1 || p.digit > n) return `digit ${p.digit} is out of range 1-${n}`;
    const i = (p.row - 1) * n + (p.col - 1);
    if (this.initial[i] !== 0) return `row ${p.row}, column ${p.col} is a given cell`;
    if (this.cells[i] !== 0) return `row ${p.row}, column ${p.col} already holds ${this.cells[i]}`;
    this.cells[i] = p.digit;
    this.lastPlaced = `${p.digit} at row ${p.row}, column ${p.col}`;
    return null;
  }

  private isSolved(): boolean {
    return this.cells.every((d, i) => d === this.solution[i]);
  }

  private reward(): number {
    if (!this.options.shapedReward) return this.isSolved() ? 1 : 0;
    let correct = 0;
    for (let i = 0; i < this.cells.length; i++) if (this.initial[i] === 0 && this.cells[i] === this.solution[i]) correct++;
    return correct / this.blanks;
  }

  private observation(status: string): string {
    const left = this.cells.filter((d) => d === 0).length;
    const o = this.options.observation;
    const view = o === 'board' ? renderBoard(this.cells, this.size) : o === 'grid' ? renderCompactGrid(this.cells, this.size) : renderNextCell(this.cells, this.size);
    return `${status}\nMove ${this.moves} of at most ${this.horizon}; ${left} blank cell(s) left.\n${view}`;
  }
}
