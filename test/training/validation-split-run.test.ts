import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RunConfig } from '../../shared/schemas/index.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { silentProgress } from '../../trainer/training/loop/index.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-validation-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const demo = JSON.parse(readFileSync(new URL('../../configs/demo.json', import.meta.url), 'utf8'));

describe('tasks.evalSplit', () => {
  it('a run with evalSplit "validation" evaluates on validation tasks, never on its eval tasks', async () => {
    const config = RunConfig.parse({
      ...demo,
      environment: { ...demo.environment, options: { ...demo.environment.options, blanks: 3 } },
      tasks: { seed: 1, trainPerIteration: 1, evalCount: 3, evalSplit: 'validation' },
      es: { ...demo.es, population: 2 },
      iterations: 1,
      evalInterval: 1,
      checkpointInterval: 1,
      workers: 1,
    });
    const sudoku = await loadEnvironment('sudoku');
    const options = sudoku.optionsSchema.parse(config.environment.options);
    const { result } = await runEmbedded({ config, run: 'validation', storeRoot: root, progress: silentProgress });
    const validation = sudoku.sampleTasks('validation', 3, 1, options).map((t) => t.id);
    const evalIds = sudoku.sampleTasks('eval', 3, 1, options).map((t) => t.id);
    expect(result.evaluations.map((e) => e.iteration)).toEqual([0, 1]);
    for (const e of result.evaluations) {
      expect(e.perTask.map((p) => p.task)).toEqual(validation);
      expect(e.perTask.some((p) => evalIds.includes(p.task))).toBe(false);
    }
  }, 60_000);

  it('refuses an unknown split, naming the field', () => {
    const r = RunConfig.safeParse({ ...demo, tasks: { seed: 1, evalSplit: 'train' } });
    expect(r.success).toBe(false);
    expect(r.error!.issues[0].path).toEqual(['tasks', 'evalSplit']);
  });
});
