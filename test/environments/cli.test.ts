import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../trainer/cli/main.ts';

async function esopt(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { stdout: (t) => out.push(t), stderr: (t) => err.push(t), readStdin: async () => '' });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

const TASK = JSON.stringify({ puzzle: '..31.1..42131.24', size: 4 });

describe('esopt tasks', () => {
  it('prints tasks of a split as JSON, the same for the same seed', async () => {
    const a = await esopt('tasks', '--env', 'sudoku', '--split', 'eval', '--n', '3', '--seed', '5', '--options', '{"size":6,"blanks":10}', '--json');
    expect(a.code).toBe(0);
    const tasks = JSON.parse(a.out);
    expect(tasks).toHaveLength(3);
    expect(tasks[0]).toMatchObject({ id: expect.stringMatching(/^sudoku-6x6-b10-[0-9a-f]{16}$/), task: { size: 6 } });
    expect((await esopt('tasks', '--env', 'sudoku', '--split', 'eval', '--n', '3', '--seed', '5', '--options', '{"size":6,"blanks":10}', '--json')).out).toBe(a.out);
  });

  it.each([
    [['--env', 'sudoku', '--split', 'test', '--n', '1'], /--split/],
    [['--env', 'sudoku', '--split', 'train'], /--n is required/],
    [['--env', 'sudoku', '--split', 'train', '--n', '1', '--options', '{"size":5}'], /invalid --options for sudoku[\s\S]*size/],
    [['--env', 'sudoku', '--split', 'train', '--n', '1', '--options', '{oops'], /--options: not valid JSON/],
    [['--env', 'go', '--split', 'train', '--n', '1'], /--env: unknown environment "go"/],
  ])('bad usage %j exits 2 naming the problem', async (argv, message) => {
    const r = await esopt('tasks', ...argv);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
  });
});

describe('esopt episode', () => {
  it('plays the oracle and prints reward, steps and transcript', async () => {
    const r = await esopt('episode', '--env', 'sudoku', '--task', TASK, '--policy', 'oracle', '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ reward: 1, steps: 6, transcript: expect.any(Array), error: null });
  });

  it('reads a task from @file and replays actions from a file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'esopt-episode-'));
    writeFileSync(join(dir, 'task.json'), TASK);
    writeFileSync(join(dir, 'moves.json'), JSON.stringify(['place 1 1 2', 'I will place 1 2 4', 'place 1 3 1']));
    const r = await esopt('episode', '--env', 'sudoku', '--task', `@${join(dir, 'task.json')}`, '--policy', `replay:${join(dir, 'moves.json')}`, '--json');
    const result = JSON.parse(r.out);
    expect(result).toMatchObject({ reward: 0, steps: 3, stopReason: 'done' }); // the third move overwrites a given
    expect(result.transcript.at(-1).info).toMatchObject({ valid: false, reason: expect.stringMatching(/given cell/) });
    expect(r.code).toBe(0);
  });

  it('prints a readable transcript without --json, and random is seeded', async () => {
    const a = await esopt('episode', '--env', 'tools', '--task', '{"kind":"days-between-orders","db":1,"person":"Mateo"}', '--policy', 'random', '--seed', '3');
    const b = await esopt('episode', '--env', 'tools', '--task', '{"kind":"days-between-orders","db":1,"person":"Mateo"}', '--policy', 'random', '--seed', '3');
    expect(a.out).toMatch(/── observation\nQuestion: How many days/);
    expect(a.out).toMatch(/reward [01] after \d+ step/);
    expect(a.out).toBe(b.out);
  });

  it.each([
    [['--env', 'sudoku', '--task', TASK, '--policy', 'genius'], /--policy: policy must be oracle, random, replay:FILE or http:URL/],
    [['--env', 'sudoku', '--task', '{"puzzle":"................","size":4}', '--policy', 'oracle'], /more than one solution/],
    [['--env', 'sudoku', '--task', TASK, '--policy', 'http:ftp://x'], /--policy/],
    [['--env', 'sudoku', '--policy', 'oracle'], /--task is required/],
    [['--env', 'sudoku', '--task', TASK, '--policy', 'oracle', '--seed', '-1'], /--seed/],
  ])('bad usage %j exits 2', async (argv, message) => {
    const r = await esopt('episode', ...argv);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
  });

  it('a missing replay file is a failure with a clear message', async () => {
    const r = await esopt('episode', '--env', 'sudoku', '--task', TASK, '--policy', 'replay:/nonexistent/moves.json');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/replay file \/nonexistent\/moves.json: ENOENT/);
  });
});
