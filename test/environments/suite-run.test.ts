/**
 * An embedded ES run on a pushed task suite: every training episode plays a task of the suite's train split,
 * every evaluation one of its eval split, and the manifest each iteration was drawn from is the one the run
 * was pinned to at its start — a push of other tasks under the same name mid-run changes nothing, on resume too.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadEnvironment } from '../../environments/index.ts';
import { pushSuite } from '../../environments/task-suites/push-suite.ts';
import { readSuite } from '../../environments/task-suites/suite-catalog.ts';
import { suiteSplitOf, suiteTaskId } from '../../environments/task-suites/suite-splits.ts';
import { keys } from '../../shared/keys.ts';
import { IterationManifest, RewardRecord, RunConfig } from '../../shared/schemas/index.ts';
import { readJson } from '../../shared/store/json.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { buildRunArtifact } from '../../trainer/training/export/run-artifact.ts';
import { silentProgress } from '../../trainer/training/loop/progress.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-suite-run-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Sudoku tasks of both halves of the hash, so the suite has train, eval and validation tasks. */
async function sudokuJsonl(seed: number, n: number): Promise<string> {
  const d = await loadEnvironment('sudoku');
  const options = d.optionsSchema.parse({});
  return [...d.sampleTasks('train', n, seed, options), ...d.sampleTasks('eval', n, seed, options)].map((t) => JSON.stringify(t.task)).join('\n');
}

describe('a run on a pushed task suite', () => {
  it('trains on its train split, evaluates on its eval split, and keeps the pinned manifest through a re-push and a resume', async () => {
    const store = new FsObjectStore(root);
    const first = await pushSuite(store, { name: 'mine', environment: 'sudoku', text: await sudokuJsonl(5, 12) });
    const suite = (await readSuite(store, first.record.manifestSha256))!;
    const idsOf = (split: string) => new Set(suite.tasks.filter((t) => suiteSplitOf(t) === split).map((t) => suiteTaskId('mine', t)));
    const [train, evalIds] = [idsOf('train'), idsOf('eval')];
    expect(train.size).toBeGreaterThanOrEqual(3);

    const config = RunConfig.parse({
      environment: { name: 'sudoku', options: {} },
      tasks: { suite: 'mine', seed: 1, trainPerIteration: 3, evalCount: 2 },
      model: { preset: 'tiny' },
      localEpisodes: 'in-process',
      es: { population: 2, sigma: 0.05, alpha: 0.05 },
      generation: { temperature: 1, topP: 1, topK: 0, maxTokens: 4 },
      iterations: 2,
      evalInterval: 1,
      checkpointInterval: 1,
      workers: 2,
      seed: 3,
    });
    // Crash after iteration 0, then push other tasks under the same name before resuming with the same config.
    const crash = new Error('crash for the test');
    const killed = await runEmbedded({ config, run: 'suite-run', storeRoot: root, progress: silentProgress, faults: (p, k) => { if (p === 'after-checkpoint' && k === 0) throw crash; } }).catch((e: unknown) => e);
    expect(killed).toBe(crash);
    const second = await pushSuite(store, { name: 'mine', environment: 'sudoku', text: await sudokuJsonl(9, 12) });
    expect(second.record.manifestSha256).not.toBe(first.record.manifestSha256);
    const { result } = await runEmbedded({ config, run: 'suite-run', storeRoot: root, progress: silentProgress });
    expect(result.rows).toHaveLength(2);

    const stored = await readJson(store, keys.config('suite-run'), RunConfig);
    expect(stored?.tasks.suite).toEqual({ name: 'mine', manifest: first.record.manifestSha256 });
    expect((await buildRunArtifact(store, 'suite-run')).artifact.suite).toEqual({ name: 'mine', manifest: first.record.manifestSha256 });
    const drawn: string[][] = [];
    for (const k of [0, 1]) {
      const m = (await readJson(store, keys.manifest('suite-run', k), IterationManifest))!;
      expect(m.suite).toEqual({ name: 'mine', manifest: first.record.manifestSha256 });
      expect(m.tasks).toHaveLength(3);
      for (const t of m.tasks) expect(train.has(t.id), t.id).toBe(true);
      drawn.push(m.tasks.map((t) => t.id));
    }
    // Each iteration draws afresh at its own seed (with 12+ train tasks, two draws of 3 agreeing exactly is a bug).
    expect(drawn[0]).not.toEqual(drawn[1]);

    // Every episode played, training and evaluation, was a task of the right split of the first push.
    const records = (await store.list(keys.run('suite-run'))).filter((k) => k.includes('/rewards/'));
    expect(records.length).toBeGreaterThanOrEqual(2 * 2 * 3 + 3 * 2);
    for (const key of records) {
      const r = RewardRecord.parse(JSON.parse(new TextDecoder().decode((await store.get(key))!)));
      expect((r.member === 'base' ? evalIds : train).has(r.task), `${key}: ${r.task}`).toBe(true);
    }
    expect(result.evaluations.map((e) => e.iteration)).toEqual([0, 1, 2]);
    for (const e of result.evaluations) for (const p of e.perTask) expect(evalIds.has(p.task)).toBe(true);
  }, 240_000);

  it('refuses at start a suite whose train split is smaller than trainPerIteration, naming the field', async () => {
    const store = new FsObjectStore(root);
    await pushSuite(store, { name: 'small', environment: 'sudoku', text: await sudokuJsonl(11, 2) });
    const config = RunConfig.parse({
      environment: { name: 'sudoku', options: {} },
      tasks: { suite: { name: 'small' }, trainPerIteration: 50 },
      model: { preset: 'tiny' },
      localEpisodes: 'in-process',
      es: { population: 2, sigma: 0.05, alpha: 0.05 },
      iterations: 1,
    });
    await expect(runEmbedded({ config, run: 'too-small', storeRoot: root, progress: silentProgress })).rejects.toThrow(/tasks\.trainPerIteration: is 50, but task suite small .* has 2 train task/);
  }, 60_000);
});
