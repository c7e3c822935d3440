import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { silentProgress } from '../../trainer/training/loop/progress.ts';
import { keys } from '../../shared/keys.ts';
import { RewardRecord } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { DemoConfig, readDemoConfig } from '../../trainer/studies/demo/demo-config.ts';
import { demoSummary } from '../../trainer/studies/demo/demo-summary.ts';
import { DemoReport, esPassed, runDemo, verdictSentence } from '../../trainer/studies/demo/demo.ts';
import { PretrainConfig, pretrain, savePretrained } from '../../trainer/studies/pretrain/pretrain.ts';
import { loadModelDir } from '../../trainer/engine/model/model-dir.ts';

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

  it('runs ES, random search and GRPO on one budget; the report matches the workers\' episode records', async () => {
    const demo = readDemoConfig(fileURLToPath(new URL('../../configs/demo.json', import.meta.url)), fileURLToPath(new URL('../../configs/demo-grpo.json', import.meta.url)));
    const config = DemoConfig.parse({
      run: {
        ...demo.run,
        // Fewer blanks: shorter episodes, the same machinery.
        environment: { ...demo.run.environment, options: { ...demo.run.environment.options, blanks: 4 } },
        model: { dir: join(root, 'model') },
        tasks: { ...demo.run.tasks, trainPerIteration: 1, evalCount: 4 },
        es: { ...demo.run.es, population: 2 },
        iterations: 2,
        evalInterval: 2,
        workers: 1,
      },
      // With a KL term, so the reference model's path runs end to end too.
      grpo: { ...demo.grpo, group: 2, klCoef: 0.05 },
    });
    const storeRoot = join(root, 'store');
    const report = await runDemo({ demo: config, run: 'demo-test', storeRoot, progress: silentProgress, showBaselineProgress: false });
    expect(DemoReport.parse(report)).toEqual(report);
    // The report says what made it: this checkout's commit, the time, the load.
    expect(report.made.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(Date.parse(report.made.date)).toBeGreaterThan(Date.now() - 3_600_000);
    expect(report.made.load).toHaveLength(3);
    // Same training budget for all three: iterations × population × tasks per iteration.
    expect(report.es.trainingEpisodes).toBe(2 * 2 * 1);
    expect(report.randomSearch.trainingEpisodes).toBe(report.es.trainingEpisodes);
    expect(report.grpo.trainingEpisodes).toBe(report.es.trainingEpisodes);
    expect(report.randomSearch.candidates).toBe(4);
    expect(report.grpo.trainReward).toHaveLength(2);

    // Every figure is recounted here from the per-episode records the workers wrote (not from the report's
    // own arithmetic): held-out task ids from the environment, one record per (θ, task).
    const store = new FsObjectStore(storeRoot);
    const sudoku = await loadEnvironment('sudoku');
    const tasks = sudoku.sampleTasks('eval', 4, config.run.tasks.seed, sudoku.optionsSchema.parse(config.run.environment.options));
    const solved = async (run: string, k: number) =>
      Promise.all(tasks.map(async (t) => {
        const r = RewardRecord.parse(JSON.parse(new TextDecoder().decode((await store.get(keys.reward(run, k, 'base', t.id)))!)));
        return r.error === null && r.reward >= config.run.successThreshold;
      }));
    const before = await solved('demo-test', 0);
    const arms = { es: await solved('demo-test', 2), randomSearch: await solved(report.runs.randomSearch, 2), grpo: await solved(report.runs.grpo, 2) };
    const count = (xs: boolean[]) => xs.filter(Boolean).length;
    expect(report.heldOut.tasks).toBe(4);
    expect(report.before.successes).toBe(count(before));
    for (const arm of ['es', 'randomSearch', 'grpo'] as const) {
      expect(report[arm].after.successes, arm).toBe(count(arms[arm]));
      const d = arms[arm].map((a, i) => Number(a) - Number(before[i]));
      const mean = d.reduce((x, y) => x + y, 0) / d.length;
      const se = Math.sqrt(d.reduce((x, y) => x + (y - mean) ** 2, 0) / (d.length - 1) / d.length);
      expect(report[arm].difference.improvement, arm).toBeCloseTo(mean, 12);
      expect(report[arm].difference.standardError, arm).toBeCloseTo(se, 12);
    }
    expect(report.esVersusGrpo.improvement).toBeCloseTo((count(arms.es) - count(arms.grpo)) / 4, 12);
    expect(report.esVersusRandomSearch.improvement).toBeCloseTo((count(arms.es) - count(arms.randomSearch)) / 4, 12);

    const summary = demoSummary(report);
    for (const line of ['after ES', 'after random search', 'after GRPO', 'ES − GRPO', 'ES − random search', report.verdict]) expect(summary).toContain(line);
    // The verdict in one sentence, with the counts it is about.
    expect(report.verdict).toMatch(new RegExp(`^(NOT )?PASSED: after 4 training episodes ES solved ${report.es.after.successes} of 4 unseen tasks against the base's ${report.before.successes} .*random search solved ${report.randomSearch.after.successes} and GRPO ${report.grpo.after.successes}\\.$`));
    expect(report.verdict.startsWith(report.passed ? 'PASSED' : 'NOT PASSED')).toBe(true);
    // One comparison chart: every method's held-out point with its bar, and the training curves.
    const svg = readFileSync(report.files.comparison, 'utf8');
    for (const m of ['base', 'es', 'randomSearch', 'grpo']) expect(svg, m).toMatch(new RegExp(`<circle data-method="${m}"`));
    for (const m of ['es', 'randomSearch', 'grpo']) expect(svg, m).toMatch(new RegExp(`<path data-method="${m}" d="M[^"]+ L`));
    expect(summary).toContain(`comparison:  ${report.files.comparison}`);
    // Failed held-out episodes are shown (none here) and void the verdict.
    expect(report.before.failed + report.es.after.failed).toBe(0);
    expect(summary).not.toContain('WARNING');
    expect(demoSummary({ ...report, before: { ...report.before, failed: 14 } })).toContain('held-out episodes failed (counted unsolved): θ₀ 14, ES 0');
    for (const f of Object.values(report.files)) expect(existsSync(f), f).toBe(true);
    expect(readFileSync(report.files.curve, 'utf8')).toContain('<svg');
    expect(JSON.parse(readFileSync(report.files.demoReport, 'utf8'))).toEqual(JSON.parse(JSON.stringify(report)));
  }, 120_000);

  it('says in one sentence what was found', () => {
    const rate = (successes: number) => ({ successRate: successes / 256, successes, tasks: 256, failed: 0, interval: { low: 0, high: 1 } });
    const diff = (improvement: number, se: number) => ({ tasks: 256, improvement, standardError: se, standardErrors: improvement / se, unpairedStandardError: se, gained: 0, lost: 0 });
    const base = { heldOut: { tasks: 256, split: 'eval' as const }, before: rate(154), requiredStandardErrors: 3, randomSearch: { after: rate(151) }, grpo: { after: rate(131) } };
    const lost = verdictSentence({ ...base, passed: false, es: { after: rate(145), difference: diff(-0.035, 0.0194), trainingEpisodes: 3840 } } as never);
    expect(lost).toBe("NOT PASSED: after 3,840 training episodes ES solved 145 of 256 unseen tasks against the base's 154 (−3.5 points, 1.8 standard errors below the base; passing needs 3 above), so ES did not improve on unseen tasks; with the same episodes random search solved 151 and GRPO 131.");
    const small = verdictSentence({ ...base, passed: false, es: { after: rate(160), difference: diff(0.0234, 0.015), trainingEpisodes: 3840 } } as never);
    expect(small).toContain("(+2.3 points, 1.6 standard errors above the base; passing needs 3 above), so ES's gain is too small to tell from chance;");
    const won = verdictSentence({ ...base, passed: true, es: { after: rate(190), difference: diff(0.14, 0.03), trainingEpisodes: 3840 } } as never);
    expect(won).toMatch(/^PASSED: .*so ES learned something that carries over to unseen tasks;/);
  });

  it('passes only above 3 paired SE with every held-out episode of θ₀ and ES played', () => {
    expect(esPassed({ improvement: 0.2, standardError: 0.05 }, { before: 0, after: 0 })).toBe(true);
    expect(esPassed({ improvement: 0.15, standardError: 0.05 }, { before: 0, after: 0 })).toBe(false);
    expect(esPassed({ improvement: 0.2, standardError: 0.05 }, { before: 14, after: 0 })).toBe(false);
    expect(esPassed({ improvement: 0.2, standardError: 0.05 }, { before: 0, after: 1 })).toBe(false);
    expect(esPassed({ improvement: 0, standardError: 0 }, { before: 0, after: 0 })).toBe(false);
  });

  it('refuses a demo config whose GRPO group differs from the ES population, naming the field', () => {
    const run = JSON.parse(readFileSync(new URL('../../configs/demo.json', import.meta.url), 'utf8'));
    const grpo = JSON.parse(readFileSync(new URL('../../configs/demo-grpo.json', import.meta.url), 'utf8'));
    const r = DemoConfig.safeParse({ run, grpo: { ...grpo, group: run.es.population + 1 } });
    expect(r.success).toBe(false);
    expect(r.error!.issues[0].path).toEqual(['grpo', 'group']);
  });
});
