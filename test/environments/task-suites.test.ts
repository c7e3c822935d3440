import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { loadEnvironment } from '../../environments/index.ts';
import { pushSuite } from '../../environments/task-suites/push-suite.ts';
import { sampleSuite } from '../../environments/task-suites/sample-suite.ts';
import { pinSuiteName, readSuite, UnknownSuiteError } from '../../environments/task-suites/suite-catalog.ts';
import { suiteSplitOf } from '../../environments/task-suites/suite-splits.ts';
import { keys } from '../../shared/keys.ts';
import { Id } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';

const dirs: string[] = [];
function store(): FsObjectStore {
  const dir = mkdtempSync(join(tmpdir(), 'esopt-suites-'));
  dirs.push(dir);
  return new FsObjectStore(dir);
}
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

async function sudokuLines(n: number): Promise<string[]> {
  const d = await loadEnvironment('sudoku');
  return d.sampleTasks('train', n, 1, d.optionsSchema.parse({})).map((t) => JSON.stringify(t.task));
}

describe('task suites', () => {
  it('pushes by content: the same tasks are one create-only object, a name pins it', async () => {
    const s = store();
    const text = (await sudokuLines(12)).join('\n') + '\n';
    const a = await pushSuite(s, { name: 'mine', environment: 'sudoku', text });
    expect(a.stored).toBe(true);
    expect(a.record.tasks).toBe(12);
    const b = await pushSuite(s, { name: 'again', environment: 'sudoku', text });
    expect(b.stored).toBe(false);
    expect(b.record.manifestSha256).toBe(a.record.manifestSha256);
    expect(await s.get(keys.suiteManifest(a.record.manifestSha256))).not.toBeNull();
    expect(await pinSuiteName(s, { name: 'mine' })).toEqual({ name: 'mine', manifest: a.record.manifestSha256, environment: 'sudoku', splits: a.record.splits });
    await expect(pinSuiteName(s, { name: 'nope' })).rejects.toMatchObject({ field: 'name' });
    await expect(pinSuiteName(s, { name: 'mine', manifest: 'f'.repeat(64) })).rejects.toBeInstanceOf(UnknownSuiteError);
  });

  it('names the line and the field path of every bad line', async () => {
    const s = store();
    const [good] = await sudokuLines(1);
    const bad = JSON.stringify({ ...JSON.parse(good), puzzle: 7 });
    const text = [good, '', '{not json', bad, good].join('\n');
    const err = await pushSuite(s, { name: 'bad', environment: 'sudoku', text }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    const m = (err as Error).message;
    expect(m).toMatch(/line 2: blank/);
    expect(m).toMatch(/line 3: not JSON/);
    expect(m).toMatch(/line 4: not a sudoku task/);
    expect(m).toMatch(/line 5: the same task as line 1/);
    expect(await s.list('suites/')).toEqual([]);
  });

  it('refuses an empty file, an unknown environment and an oversize line', async () => {
    const s = store();
    await expect(pushSuite(s, { name: 'e', environment: 'sudoku', text: '\n' })).rejects.toThrow(/empty/);
    await expect(pushSuite(s, { name: 'e', environment: 'chess', text: '{}' })).rejects.toThrow(/environment "chess"/);
    await expect(pushSuite(s, { name: 'e', environment: 'sudoku', text: `"${'x'.repeat(70_000)}"` })).rejects.toThrow(/line 1: 70002 bytes/);
  });

  it('samples deterministically, without replacement, ids from the suite, and refuses a split too small', async () => {
    const s = store();
    const pushed = await pushSuite(s, { name: 'mine', environment: 'sudoku', text: (await sudokuLines(40)).join('\n') });
    const suite = (await readSuite(s, pushed.record.manifestSha256))!;
    const named = { name: 'mine', tasks: suite.tasks };
    const n = pushed.record.splits.train;
    const all = sampleSuite(named, 'train', n, 3);
    expect(new Set(all.map((t) => t.id)).size).toBe(n);
    expect(sampleSuite(named, 'train', 2, 3)).toEqual(all.slice(0, 2));
    expect(all.every((t) => Id.safeParse(t.id).success && t.id.startsWith('mine-'))).toBe(true);
    expect(() => sampleSuite(named, 'train', n + 1, 3)).toThrow(new RegExp(`has ${n} train task`));
  });

  it('keeps the splits disjoint whatever the tasks', () => {
    fc.assert(
      fc.property(fc.array(fc.jsonValue(), { minLength: 1, maxLength: 30 }), fc.integer({ min: 0, max: 2 ** 32 - 1 }), (tasks, seed) => {
        const unique = [...new Map(tasks.map((t) => [JSON.stringify(t), t])).values()];
        const suite = { name: 's', tasks: unique };
        const ids = (['train', 'eval', 'validation'] as const).map((split) => sampleSuite(suite, split, unique.filter((t) => suiteSplitOf(t) === split).length, seed).map((t) => t.id));
        const flat = ids.flat();
        expect(new Set(flat).size).toBe(unique.length);
      }),
      { numRuns: 100 },
    );
  });
});
