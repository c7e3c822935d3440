import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RunConfig } from '../../shared/schemas/index.ts';
import { silentProgress } from '../../trainer/loop/progress.ts';
import { DemoReport, runDemo } from '../../trainer/demo/demo.ts';
import { PretrainConfig, pretrain, savePretrained } from '../../trainer/pretrain/pretrain.ts';
import { loadModelDir } from '../../trainer/model/model-dir.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-demo-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// The demo's pretraining config, shrunk to seconds: same environment, model shape and context.
const demoPretrain = PretrainConfig.parse(JSON.parse(readFileSync(new URL('../../configs/pretrain-sudoku-4x4-demo.json', import.meta.url), 'utf8')));
const short = PretrainConfig.parse({ ...demoPretrain, tasks: { count: 3, seed: 4 }, steps: 3, batch: 2, warmupSteps: 0 });

describe('demo', () => {
  it('pretraining is deterministic in its config and exports a loadable model', async () => {
    const a = await pretrain(short);
    const b = await pretrain(short);
    expect(a.history.map((s) => s.loss)).toEqual(b.history.map((s) => s.loss));
    a.weights.forEach((t, i) => expect(Buffer.from(t.data.buffer).equals(Buffer.from(b.weights[i].data.buffer)), t.name).toBe(true));
    // The loss went down over the steps on this (tiny) data.
    expect(a.history[2].loss).toBeLessThan(a.history[0].loss);
    const dir = join(root, 'model');
    savePretrained(dir, a);
    const loaded = loadModelDir(dir);
    expect(loaded.config.max_position_embeddings).toBe(demoPretrain.model.contextLength);
    expect(loaded.weights.map((w) => w.name)).toEqual(a.weights.map((w) => w.name));
    loaded.weights.forEach((w, i) => expect(Array.from(w.data)).toEqual(Array.from(a.weights[i].data)));
  });

  it('runs ES and the same-budget random search end to end and writes the report', async () => {
    const demo = RunConfig.parse(JSON.parse(readFileSync(new URL('../../configs/demo.json', import.meta.url), 'utf8')));
    const config = RunConfig.parse({
      ...demo,
      model: { dir: join(root, 'model') },
      tasks: { ...demo.tasks, trainPerIteration: 1, evalCount: 3 },
      es: { ...demo.es, population: 2 },
      iterations: 2,
      evalInterval: 2,
      workers: 1,
    });
    const report = await runDemo({ config, run: 'demo-test', storeRoot: join(root, 'store'), progress: silentProgress, showBaselineProgress: false });
    expect(DemoReport.parse(report)).toEqual(report);
    // Same training budget for both arms: iterations × population × tasks per iteration.
    expect(report.es.trainingEpisodes).toBe(2 * 2 * 1);
    expect(report.randomSearch.trainingEpisodes).toBe(report.es.trainingEpisodes);
    expect(report.randomSearch.candidates).toBe(4);
    expect(report.heldOut.tasks).toBe(3);
    expect(report.passed).toBe(report.es.difference.standardError > 0 && report.es.difference.improvement > 3 * report.es.difference.standardError);
    for (const f of Object.values(report.files)) expect(existsSync(f), f).toBe(true);
    expect(readFileSync(report.files.curve, 'utf8')).toContain('<svg');
    expect(JSON.parse(readFileSync(report.files.demoReport, 'utf8'))).toEqual(JSON.parse(JSON.stringify(report)));
  }, 120_000);
});
