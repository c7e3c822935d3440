import { describe, expect, it } from 'vitest';
import { environmentNames, loadEnvironment } from '../../environments/index.ts';
import { readFileSync } from 'node:fs';
import { heldOutTasks, sampleSplit, splitOf, taskId } from '../../environments/task-sampler.ts';
import { runConfigAt, HorizonExperimentConfig } from '../../trainer/studies/experiment/horizon-config.ts';
import { Id } from '../../shared/schemas/index.ts';

describe('task sampling', () => {
  it('registers sudoku and tools, and names the known ones for an unknown name', async () => {
    expect(environmentNames()).toEqual(expect.arrayContaining(['sudoku', 'tools']));
    await expect(loadEnvironment('chess')).rejects.toThrow(/unknown environment "chess" \(known: .*sudoku.*tools/);
  });

  it.each([
    ['sudoku', { size: 4 }],
    ['sudoku', { size: 9, blanks: 15 }],
    ['tools', {}],
  ])('%s %j: deterministic per seed, valid tasks, ids that are store-safe, and train ∩ eval = ∅', async (name, raw) => {
    const def = await loadEnvironment(name);
    const options = def.optionsSchema.parse(raw);
    expect(def.sampleTasks('train', 6, 42, options)).toEqual(def.sampleTasks('train', 6, 42, options));
    expect(def.sampleTasks('train', 6, 42, options)).not.toEqual(def.sampleTasks('train', 6, 43, options));
    // Disjoint across many seeds of both splits, not just one seed pair.
    const train = new Map<string, string>();
    const evalIds = new Set<string>();
    for (let seed = 0; seed < 8; seed++) {
      for (const t of def.sampleTasks('train', 10, seed, options)) train.set(t.id, JSON.stringify(t.task));
      for (const t of def.sampleTasks('eval', 10, seed, options)) {
        evalIds.add(t.id);
        expect(def.taskSchema.safeParse(t.task).success).toBe(true);
        expect(Id.safeParse(t.id).success).toBe(true);
        expect(splitOf(t.task)).toBe('eval');
        expect([...train.values()]).not.toContain(JSON.stringify(t.task));
      }
    }
    for (const id of evalIds) expect(train.has(id)).toBe(false);
    expect(train.size).toBeGreaterThan(40); // distinct tasks: the space is not degenerate
  });

  it('a split has n distinct tasks, and a space too small for n is a clear error', () => {
    const coin = { idPrefix: 'coin', generate: (r: { int: (n: number) => number }) => ({ face: r.int(4) }) };
    const tasks = sampleSplit(coin, 'train', 1, 0);
    expect(tasks[0].id).toBe(taskId('coin', tasks[0].task));
    expect(() => sampleSplit(coin, 'train', 10, 0)).toThrow(/could only find \d distinct train tasks of "coin" \(asked for 10\)/);
  });

  it.each([
    ['sudoku', { size: 6, blanks: 15 }],
    ['tools', {}],
  ])('%s %j: validation tasks are deterministic, never train tasks, and not the eval tasks of their seed', async (name, raw) => {
    const def = await loadEnvironment(name);
    const options = def.optionsSchema.parse(raw);
    expect(def.sampleTasks('validation', 8, 5, options)).toEqual(def.sampleTasks('validation', 8, 5, options));
    const train = new Set<string>();
    for (let seed = 0; seed < 8; seed++) for (const t of def.sampleTasks('train', 10, seed, options)) train.add(t.id);
    for (let seed = 0; seed < 8; seed++) {
      const validation = heldOutTasks(def, 'validation', 10, seed, options);
      const evalIds = new Set(def.sampleTasks('eval', 10, seed, options).map((t) => t.id));
      for (const t of validation) {
        expect(train.has(t.id)).toBe(false);
        expect(evalIds.has(t.id)).toBe(false);
      }
    }
  });

  it('adding the validation split moved no eval task: the committed horizon results name the same held-out tasks', () => {
    const c = HorizonExperimentConfig.parse(JSON.parse(readFileSync(new URL('../../configs/experiment-horizon.json', import.meta.url), 'utf8')));
    const cell = JSON.parse(readFileSync(new URL('../../results/horizon/combined/h15-s1.json', import.meta.url), 'utf8'));
    return loadEnvironment('sudoku').then((def) => {
      const config = runConfigAt(c, 15, 1);
      const tasks = heldOutTasks(def, config.tasks.evalSplit, config.tasks.evalCount, config.tasks.seed, def.optionsSchema.parse(config.environment.options));
      expect(tasks.map((t) => t.id)).toEqual(cell.tasks);
    });
  });

  it('refuses validation tasks that are also eval tasks (a task space too small to keep them apart)', () => {
    const coin = { idPrefix: 'coin', generate: (r: { int: (n: number) => number }) => ({ face: r.int(8) }) };
    const def = { name: 'coin', sampleTasks: (split: 'train' | 'eval' | 'validation', n: number, seed: number) => sampleSplit(coin, split, n, seed) };
    expect(() => heldOutTasks(def, 'validation', 3, 0, {})).toThrow(/coin: \d validation task\(s\) are also eval tasks at seed 0 \(coin-[0-9a-f]{16}.*use another tasks\.seed/);
    expect(heldOutTasks(def, 'eval', 3, 0, {})).toEqual(sampleSplit(coin, 'eval', 3, 0));
  });
});
