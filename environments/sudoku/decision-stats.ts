/**
 * Why the grid setting is hard, measured: along the oracle's own path, how many legal moves each turn
 * offers (and how many of them are right), and how often a uniformly random legal policy solves the task.
 */
import { SeededRandom } from '../random.ts';
import { nextCell, parseGrid, type Size } from './grid.ts';
import { deadCell, legalMoves } from './legal-moves.ts';
import { solve } from './solver.ts';
import type { SudokuTask } from './task.ts';

export interface DecisionStats {
  tasks: number;
  /** Turns on the oracle's path (one per blank). */
  turns: number;
  /** Share of those turns with more than one legal move. */
  multiChoiceShare: number;
  /** Mean legal moves per turn on the oracle's path. */
  meanLegalMoves: number;
  /** Mean share of a turn's legal moves that agree with the solution. */
  meanRightShare: number;
  /** Uniformly random legal policy: rollouts per task and the share that solved the grid. */
  randomRollouts: number;
  randomSuccessRate: number;
}

export function decisionStats(tasks: readonly SudokuTask[], rolloutsPerTask: number, seed: number): DecisionStats {
  let turns = 0;
  let multi = 0;
  let legalSum = 0;
  let rightShareSum = 0;
  let solved = 0;
  const random = new SeededRandom(seed, 0xd5);
  for (const task of tasks) {
    const size = task.size as Size;
    const start = parseGrid(task.puzzle, size);
    const solution = solve(start, size, 1).solution!;
    const cells = start.slice();
    for (let i = nextCell(cells, size); i !== null; i = nextCell(cells, size)) {
      const moves = legalMoves(cells, size);
      turns++;
      if (moves.length > 1) multi++;
      legalSum += moves.length;
      rightShareSum += moves.filter((m) => solution[m.cell] === m.digit).length / moves.length;
      cells[i] = solution[i];
    }
    for (let r = 0; r < rolloutsPerTask; r++) {
      const play = start.slice();
      for (;;) {
        const moves = legalMoves(play, size);
        if (moves.length === 0) break;
        const m = moves[random.int(moves.length)];
        play[m.cell] = m.digit;
        if (deadCell(play, size) !== null) break;
      }
      if (play.every((d, i) => d === solution[i])) solved++;
    }
  }
  return {
    tasks: tasks.length,
    turns,
    multiChoiceShare: multi / turns,
    meanLegalMoves: legalSum / turns,
    meanRightShare: rightShareSum / turns,
    randomRollouts: tasks.length * rolloutsPerTask,
    randomSuccessRate: solved / (tasks.length * rolloutsPerTask),
  };
}
