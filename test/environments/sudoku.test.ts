import { describe, expect, it } from 'vitest';
import { runEpisode } from '../../environments/episode-runner.ts';
import type { Environment } from '../../environments/environment.ts';
import { scriptedPolicy } from '../../environments/policies/scripted.ts';
import { SeededRandom } from '../../environments/random.ts';
import { parsePlacement } from '../../environments/sudoku/action.ts';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { generatePuzzle } from '../../environments/sudoku/generator.ts';
import { parseGrid, type Size } from '../../environments/sudoku/grid.ts';
import { decisionStats } from '../../environments/sudoku/decision-stats.ts';
import { solve } from '../../environments/sudoku/solver.ts';
import { SudokuOptions, SudokuTask } from '../../environments/sudoku/task.ts';
import type { PolicyReply } from '../../shared/ports/policy.ts';

// A classic puzzle with one solution (and that solution), to test against known values.
const PUZZLE = '53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79';
const SOLUTION = '534678912672195348198342567859761423426853791713924856961537284287419635345286179';
const SMALL = { puzzle: '..31.1..42131.24', size: 4 } as const; // 6 blanks; solution 2431/3142/4213/1324

const act = (text: string): PolicyReply => ({ text, tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 });
const options = (o: Partial<SudokuOptions> = {}) => SudokuOptions.parse(o);
async function episode(task: SudokuTask, o: Partial<SudokuOptions> = {}): Promise<Environment> {
  const env = await sudoku.create(SudokuTask.parse(task), options(o));
  await env.reset(0);
  return env;
}

describe('solver', () => {
  it('solves a known puzzle to its known solution and calls it unique', () => {
    const r = solve(parseGrid(PUZZLE, 9), 9, 2);
    expect(r.count).toBe(1);
    expect(r.solution!.join('')).toBe(SOLUTION);
  });
  it('finds a second solution when there is one, and none for conflicting givens', () => {
    expect(solve(parseGrid('.'.repeat(16), 4), 4, 2).count).toBe(2);
    expect(solve(parseGrid(`11${'.'.repeat(14)}`, 4), 4, 2).count).toBe(0);
  });
});

describe('generator', () => {
  it.each([
    [4, 6],
    [4, 10],
    [6, 12],
    [6, 20],
    [9, 15],
    [9, 45],
  ] as const)('size %i with %i blanks: exactly that many blanks and a unique solution', (size, blanks) => {
    const random = new SeededRandom(7);
    for (let k = 0; k < 5; k++) {
      const puzzle = generatePuzzle(size as Size, blanks, random);
      expect([...puzzle].filter((c) => c === '.').length).toBe(blanks);
      expect(solve(parseGrid(puzzle, size as Size), size as Size, 2).count).toBe(1);
    }
  });
  it('is deterministic per seed and differs across seeds', () => {
    expect(generatePuzzle(9, 15, new SeededRandom(3))).toBe(generatePuzzle(9, 15, new SeededRandom(3)));
    expect(generatePuzzle(9, 15, new SeededRandom(3))).not.toBe(generatePuzzle(9, 15, new SeededRandom(4)));
  });
  it('rejects impossible blank counts with a clear error', () => {
    expect(() => generatePuzzle(4, 16, new SeededRandom(1))).toThrow(/blanks must be 1-15/);
    expect(() => generatePuzzle(4, 15, new SeededRandom(1))).toThrow(/use fewer blanks/);
  });
});

describe('task schema', () => {
  it('accepts a puzzle with one solution', () => {
    expect(SudokuTask.safeParse({ puzzle: PUZZLE, size: 9 }).success).toBe(true);
  });
  it.each([
    [{ puzzle: '.'.repeat(16), size: 4 }, /more than one solution/],
    [{ puzzle: `11${'.'.repeat(14)}`, size: 4 }, /no solution/],
    [{ puzzle: '1234341221434321', size: 4 }, /no blanks/],
    [{ puzzle: PUZZLE.slice(1), size: 9 }, /81 cells, got 80/],
    [{ puzzle: PUZZLE.replace('.', '0'), size: 9 }, /cell 3 .*"0"/],
    [{ puzzle: '5...'.repeat(4), size: 4 }, /"5": expected "." or a digit 1-4/],
    [{ puzzle: PUZZLE, size: 8 }, /size/],
  ])('rejects %j', (task, message) => {
    const r = SudokuTask.safeParse(task);
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('\n')).toMatch(message);
  });
  it('refuses to supply a solution field (it is computed)', () => {
    expect(SudokuTask.safeParse({ ...SMALL, solution: '2431314242131324' }).success).toBe(false);
  });
});

describe('actions', () => {
  it.each([
    ['place 1 3 4', { row: 1, col: 3, digit: 4 }],
    ['I think the answer is: Place(2, 5, 9). Then place 1 1 1', { row: 2, col: 5, digit: 9 }],
    ['place r1 c3 4', { row: 1, col: 3, digit: 4 }],
    ['PLACE row 7, col 8, digit 2', { row: 7, col: 8, digit: 2 }],
    ['place 10 1 1', { row: 10, col: 1, digit: 1 }],
  ])('parses %j', (text, expected) => {
    expect(parsePlacement(text)).toEqual(expected);
  });
  it.each(['', 'put 1 3 4', 'place 1 3', 'place a b c'])('finds no action in %j', (text) => {
    expect(parsePlacement(text)).toBeNull();
  });
});

describe('episodes', () => {
  it.each([
    [4, 6],
    [4, 10],
    [6, 12],
    [6, 18],
    [9, 15],
    [9, 40],
  ] as const)('the oracle earns reward 1 on every generated task of size %i with %i blanks', async (size, blanks) => {
    const o = options({ size, blanks });
    const tasks = [...sudoku.sampleTasks('train', 4, 11, o), ...sudoku.sampleTasks('eval', 4, 11, o)];
    for (const { task } of tasks) {
      const r = await runEpisode({ definition: sudoku, task, options: o, policy: sudoku.oracle(task, o), seed: 0 });
      expect(r).toMatchObject({ reward: 1, steps: blanks, error: null, stopReason: 'done' });
    }
  });

  it('the random policy earns about 0 on 9×9 with 15 blanks (15 correct moves needed)', async () => {
    const o = options({ size: 9, blanks: 15 });
    const tasks = sudoku.sampleTasks('eval', 10, 5, o);
    let total = 0;
    let episodes = 0;
    for (const { task } of tasks) {
      for (let seed = 0; seed < 5; seed++) {
        const r = await runEpisode({ definition: sudoku, task, options: o, policy: sudoku.random(task, o, seed), seed });
        expect(r.error).toBeNull();
        expect(r.steps).toBe(15); // legal moves only: it fills every blank, almost never correctly
        total += r.reward;
        episodes++;
      }
    }
    expect(total / episodes).toBeLessThan(0.05);
  });

  it('shows the board and the move count, and rewards 1 only for the solved grid', async () => {
    const env = await episode(SMALL);
    expect(env.horizon).toBe(8); // 6 blanks + slack 2
    const first = await env.step(act('place 1 1 2'));
    expect(first).toMatchObject({ done: false, info: { valid: true, moves: 1 } });
    expect(first.observation).toMatch(/Move 1 of at most 8; 5 blank cell\(s\) left/);
    expect(first.observation).toMatch(/1 \| 2 \. \| 3 1/);
    for (const a of ['place 1 2 4', 'place 2 1 3', 'place 2 3 4', 'place 2 4 2']) expect((await env.step(act(a))).done).toBe(false);
    // A wrong but legal digit in the last blank fills the grid without solving it.
    expect(await env.step(act('place 4 2 4'))).toMatchObject({ done: true, reward: 0, info: { solved: false } });
  });

  it.each([
    ['place 1 3 2', /given cell/],
    ['place 5 1 1', /row 5 is out of range 1-4/],
    ['place 1 0 1', /column 0 is out of range/],
    ['place 1 1 7', /digit 7 is out of range/],
    ['hmm, not sure', /no "place <row> <col> <digit>" action/],
  ])('an invalid move (%j) ends the episode by default', async (text, reason) => {
    const env = await episode(SMALL);
    const r = await env.step(act(text));
    expect(r).toMatchObject({ done: true, reward: 0, info: { valid: false } });
    expect(String(r.info.reason)).toMatch(reason);
  });

  it('overwriting a placed digit is invalid too', async () => {
    const env = await episode(SMALL);
    await env.step(act('place 1 1 2'));
    const r = await env.step(act('place 1 1 2'));
    expect(r).toMatchObject({ done: true, reward: 0, info: { valid: false } });
    expect(String(r.info.reason)).toMatch(/already holds 2/);
  });

  it('with invalidMove "waste" an invalid move only uses up a step, and the horizon still binds', async () => {
    const env = await episode(SMALL, { invalidMove: 'waste' });
    const r = await env.step(act('place 1 3 2'));
    expect(r).toMatchObject({ done: false, info: { valid: false } });
    expect(r.observation).toMatch(/That move was wasted/);
    // 1 wasted + 6 correct = 7 ≤ 8: still solved.
    const o = options({ invalidMove: 'waste' });
    const oracleMoves = ['place 1 1 2', 'place 1 2 4', 'place 2 1 3', 'place 2 3 4', 'place 2 4 2', 'place 4 2 3'];
    const solved = await runEpisode({ definition: sudoku, task: SMALL, options: o, policy: scriptedPolicy(['garbage', ...oracleMoves], 'script'), seed: 0 });
    expect(solved).toMatchObject({ reward: 1, steps: 7 });
    // 3 wasted moves + 6 needed > 8: the horizon ends it unsolved.
    const late = await runEpisode({ definition: sudoku, task: SMALL, options: o, policy: scriptedPolicy(['x', 'y', 'z', ...oracleMoves], 'script'), seed: 0 });
    expect(late).toMatchObject({ reward: 0, steps: 8, stopReason: 'done' });
    expect(late.transcript.at(-1)).toMatchObject({ kind: 'observation', done: true, text: expect.stringMatching(/No moves left/) });
  });

  it('the horizon is configurable: blanks + slack, or set outright', async () => {
    expect((await episode(SMALL, { slack: 0 })).horizon).toBe(6);
    expect((await episode(SMALL, { horizon: 3 })).horizon).toBe(3);
    const r = await runEpisode({ definition: sudoku, task: SMALL, options: { horizon: 3 }, policy: sudoku.oracle(SMALL, options()), seed: 0 });
    expect(r).toMatchObject({ reward: 0, steps: 3 });
  });

  it('the shaped reward (off by default) is the fraction of blanks filled correctly', async () => {
    const moves = ['place 1 1 2', 'place 1 2 4', 'place 2 1 3', 'place 9 9 9'];
    const plain = await runEpisode({ definition: sudoku, task: SMALL, policy: scriptedPolicy(moves, 's'), seed: 0 });
    expect(plain.reward).toBe(0);
    const shaped = await runEpisode({ definition: sudoku, task: SMALL, options: { shapedReward: true }, policy: scriptedPolicy(moves, 's'), seed: 0 });
    expect(shaped.reward).toBeCloseTo(3 / 6, 12);
  });

  it('replays a script of raw action texts in order, and running past it is an error, not a crash', async () => {
    const r = await runEpisode({ definition: sudoku, task: SMALL, options: { invalidMove: 'waste' }, policy: scriptedPolicy(['place 1 1 2', 'place 1 2 4'], 'replay file x.json'), seed: 0 });
    expect(r.steps).toBe(2);
    expect(r.transcript.filter((e) => e.kind === 'action').map((e) => e.text)).toEqual(['place 1 1 2', 'place 1 2 4']);
    expect(r.error).toMatch(/replay file x.json has only 2 action\(s\)/);
  });
});

describe('action constraint', () => {
  it('off by default; when on, it names exactly the blank cells, shrinking as they fill', async () => {
    expect((await episode(SMALL)).actionConstraint?.()).toBeUndefined();
    const env = await episode(SMALL, { size: 4, constrainActions: true });
    const pattern = () => {
      const c = env.actionConstraint!();
      if (!c || !('regex' in c)) throw new Error('expected a regex constraint');
      return new RegExp(`^(?:${c.regex})$`);
    };
    // Blanks of '..31.1..42131.24': (1,1) (1,2) (2,1) (2,3) (2,4) (4,2).
    for (const move of ['place 1 1 2', 'place 1 2 4', 'place 4 2 1']) expect(move).toMatch(pattern());
    for (const move of ['place 1 3 2', 'place 3 1 4', 'place 1 1 0', 'place 1 2 9', 'place 1 1 2 ', 'Place 1 1 2']) expect(move).not.toMatch(pattern());
    await env.step(act('place 1 1 2'));
    expect('place 1 1 2').not.toMatch(pattern());
    expect('place 1 2 4').toMatch(pattern());
  });

  it('reaches the policy every turn, and the oracle always satisfies it', async () => {
    const o = options({ size: 4, constrainActions: true });
    const oracle = sudoku.oracle(SudokuTask.parse(SMALL), o);
    const seen: string[] = [];
    const result = await runEpisode({
      definition: sudoku,
      task: SMALL,
      options: o,
      seed: 0,
      policy: {
        async act(messages, context) {
          const reply = await oracle.act(messages, context);
          if (!context.constraint || !('regex' in context.constraint)) throw new Error('no constraint in the policy context');
          expect(reply.text).toMatch(new RegExp(`^(?:${context.constraint.regex})$`));
          seen.push(context.constraint.regex);
          return reply;
        },
      },
    });
    expect(result.reward).toBe(1);
    expect(seen).toHaveLength(6);
    expect(new Set(seen).size).toBe(6);
  });
});

describe('next-cell observation', () => {
  it('names the blank that sees the most digits with what it sees, constrains replies to it, and follows the moves', async () => {
    const o = { size: 4, observation: 'next-cell', constrainActions: true, invalidMove: 'waste' } as const;
    const env = await sudoku.create(SudokuTask.parse(SMALL), options(o));
    const first = await env.reset(0);
    // '..31.1..42131.24' → rows ". . 3 1" / ". 1 . ." / "4 2 1 3" / "1 . 2 4": (1,1) sees 1 3 4, (1,2) 1 2 3,
    // (2,1) 1 4, (2,3) 1 2 3, (2,4) 1 3 4, (4,2) 1 2 4 → three see three digits; the first in reading order is named.
    expect(first).not.toContain('|');
    expect(first.split('\n').slice(-1)).toEqual(['1 1: 1 . 3 4']);
    expect(env.actionConstraint!()).toEqual({ regex: 'place (1 1) [1-4]' });
    const next = (await env.step(act('place 1 1 2'))).observation;
    // Now (2,1) sees 1 2 4 and (1,2) sees 1 2 3: (1,2) comes first in reading order.
    expect(next.split('\n').slice(-1)).toEqual(['1 2: 1 2 3 .']);
  });

  it('the oracle plays in the named order and solves', async () => {
    const o = options({ size: 4, observation: 'next-cell', constrainActions: true });
    const oracle = sudoku.oracle(SudokuTask.parse(SMALL), o);
    let matched = 0;
    const policy = {
      async act(messages: Parameters<typeof oracle.act>[0], context: Parameters<typeof oracle.act>[1]) {
        const reply = await oracle.act(messages, context);
        if (context.constraint && 'regex' in context.constraint && new RegExp(`^(?:${context.constraint.regex})$`).test(reply.text)) matched++;
        return reply;
      },
    };
    const result = await runEpisode({ definition: sudoku, task: SMALL, options: o, policy, seed: 0 });
    expect(result.reward).toBe(1);
    expect(result.steps).toBe(6);
    expect(matched).toBe(6);
  });
});

describe('grid observation (the long-horizon setting)', () => {
  const o = () => options({ size: 4, observation: 'grid', constrainActions: true, slack: 0 });

  it('shows the whole board and allows every legal move, several per turn', async () => {
    const env = await sudoku.create(SudokuTask.parse(SMALL), o());
    const first = await env.reset(0);
    expect(first.split('\n').slice(-5)).toEqual(['Board:', '..31', '.1..', '4213', '1.24']);
    expect(env.horizon).toBe(6);
    // (2,1) may take 2 or 3; the solution has 3 there.
    expect(env.actionConstraint!()).toEqual({ regex: 'place (1 1 [2]|1 2 [4]|2 1 [23]|2 3 [4]|2 4 [2]|4 2 [3])' });
  });

  it('a legal but wrong move that leaves a blank without a digit ends the episode with reward 0', async () => {
    const env = await sudoku.create(SudokuTask.parse(SMALL), o());
    await env.reset(0);
    const r = await env.step(act('place 2 1 2'));
    expect(r.done).toBe(true);
    expect(r.reward).toBe(0);
    expect(r.observation).toMatch(/Dead end: no digit fits row 1, column 1/);
  });

  it('the oracle solves in most-constrained order within the horizon', async () => {
    const result = await runEpisode({ definition: sudoku, task: SMALL, options: o(), policy: sudoku.oracle(SudokuTask.parse(SMALL), o()), seed: 0 });
    expect(result.reward).toBe(1);
    expect(result.steps).toBe(6);
  });

  it('decision statistics: most turns offer a choice, and random legal play fails more as the horizon grows', async () => {
    const stats = (blanks: number) => {
      const opt = options({ size: 6, blanks, observation: 'grid', constrainActions: true, slack: 0 });
      return decisionStats(sudoku.sampleTasks('eval', 20, 1, opt).map((t) => t.task), 10, 1);
    };
    const short = stats(4);
    const long = stats(15);
    expect(long.turns).toBe(20 * 15);
    expect(long.multiChoiceShare).toBeGreaterThan(0.8);
    expect(long.meanLegalMoves).toBeGreaterThan(short.meanLegalMoves);
    expect(long.randomSuccessRate).toBeLessThan(short.randomSuccessRate);
  });
});
