/**
 * What `npm start` runs: the ES training run of a config through the embedded trainer (store, inference
 * server, local worker pool, ES loop), then the random-search control with the same training-episode
 * budget on a fresh copy of θ₀, then one report comparing both on the held-out tasks with paired standard
 * errors. The ES run's own report and curve are written by the loop (trainer/loop/embedded-run.ts); this
 * adds `demo-report.json` next to them.
 */
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import { z } from 'zod';
import { keys } from '../../shared/keys.ts';
import { EvaluationResult, RunConfig } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { wilsonInterval } from '../../shared/wilson.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { localRunTarget } from '../fanout/local-target.ts';
import { runEmbedded, serveModel } from '../loop/embedded-run.ts';
import type { TrainingProgress } from '../loop/progress.ts';
import { pairedDifference, type PairedDifference } from './paired-difference.ts';
import { randomSearch } from './random-search.ts';

/** How many standard errors the ES improvement must clear for the demo to count as a success. */
export const REQUIRED_STANDARD_ERRORS = 3;

const Rate = z.object({ successRate: z.number(), successes: z.number().int(), tasks: z.number().int(), interval: z.object({ low: z.number(), high: z.number() }) });
const Difference = z.object({
  tasks: z.number().int(),
  improvement: z.number(),
  standardError: z.number(),
  /** null when the standard error is 0 (every task moved the same way, or none moved). */
  standardErrors: z.number().nullable(),
  unpairedStandardError: z.number(),
  gained: z.number().int(),
  lost: z.number().int(),
});

export const DemoReport = z.object({
  run: z.string(),
  baselineRun: z.string(),
  config: RunConfig,
  seeds: z.object({ run: z.number().int(), tasks: z.number().int(), model: z.union([z.number().int(), z.string()]) }),
  heldOut: z.object({ tasks: z.number().int(), split: z.literal('eval') }),
  before: Rate,
  es: z.object({ after: Rate, difference: Difference, trainingEpisodes: z.number().int(), failedEpisodes: z.number().int(), wallMs: z.number() }),
  randomSearch: z.object({
    after: Rate,
    difference: Difference,
    trainingEpisodes: z.number().int(),
    failedEpisodes: z.number().int(),
    candidates: z.number().int(),
    best: z.object({ round: z.number().int(), member: z.number().int(), trainReward: z.number() }),
    wallMs: z.number(),
  }),
  /** ES after − random search after, paired on the same held-out tasks. */
  esVersusRandomSearch: Difference,
  requiredStandardErrors: z.number(),
  passed: z.boolean(),
  files: z.object({ demoReport: z.string(), esReport: z.string(), curve: z.string() }),
  wallMs: z.number(),
});
export type DemoReport = z.infer<typeof DemoReport>;

export interface DemoOptions {
  config: RunConfig;
  run: string;
  storeRoot: string;
  progress: TrainingProgress;
  /** Show the random-search rounds as a bar on stderr. */
  showBaselineProgress: boolean;
}

function successes(e: EvaluationResult, threshold: number): boolean[] {
  return e.perTask.map((p) => p.error === null && p.reward >= threshold);
}

function rate(e: EvaluationResult): z.infer<typeof Rate> {
  return { successRate: e.successRate, successes: e.successes, tasks: e.tasks, interval: wilsonInterval(e.successes, e.tasks) };
}

function difference(d: PairedDifference): z.infer<typeof Difference> {
  return {
    tasks: d.tasks,
    improvement: d.improvement,
    standardError: d.standardError,
    standardErrors: Number.isFinite(d.standardErrors) && d.standardError > 0 ? d.standardErrors : null,
    unpairedStandardError: d.unpairedStandardError,
    gained: d.gained,
    lost: d.lost,
  };
}

export async function runDemo(o: DemoOptions): Promise<DemoReport> {
  const { config, run, storeRoot } = o;
  const started = performance.now();
  const es = await runEmbedded({ config, run, storeRoot, progress: o.progress });
  const evaluations = es.result.evaluations;
  const before = evaluations.find((e) => e.iteration === 0);
  const after = evaluations.find((e) => e.iteration === config.iterations);
  if (!before || !after) throw new Error(`run ${run} has no evaluation of θ_0 or θ_${config.iterations}`);
  const esMs = performance.now() - started;

  // The control: same budget, same members and tasks per round, a fresh θ₀, nothing learned.
  const baselineRun = `${run}-random-search`;
  const environment = await loadEnvironment(config.environment.name);
  // The loop's held-out sample, drawn again the same way (deterministic in the seed), checked by id.
  const options = environment.optionsSchema.parse(config.environment.options);
  const heldOut = environment.sampleTasks('eval', config.tasks.evalCount, config.tasks.seed, options).map((t) => ({ id: t.id, task: t.task }));
  if (heldOut.some((t, i) => t.id !== before.perTask[i]?.task)) throw new Error('the held-out tasks drawn for the control differ from the ES run\'s evaluation tasks');
  const { engine, server, close } = await serveModel(config);
  const target = localRunTarget(storeRoot, { workers: config.workers });
  const bar = o.showBaselineProgress
    ? new cliProgress.SingleBar(
        { stream: process.stderr, format: 'random search |{bar}| round {value}/{total} | best train reward {best} | ETA {eta_formatted}', noTTYOutput: true, notTTYSchedule: 5000, hideCursor: true },
        cliProgress.Presets.shades_classic,
      )
    : null;
  const baselineStarted = performance.now();
  let baseline;
  try {
    bar?.start(config.iterations, 0, { best: '–' });
    baseline = await randomSearch({
      run: baselineRun,
      config,
      store: target.store,
      fanout: target.fanout,
      engine,
      population: server.service,
      policy: { baseUrl: `${server.url}/v1` },
      environment,
      evalTasks: heldOut,
      onRound: (round, best) => bar?.update(round + 1, { best: best.reward.toFixed(3) }),
    });
  } finally {
    bar?.stop();
    await target.close();
    await close();
  }
  const baselineMs = performance.now() - baselineStarted;

  const threshold = config.successThreshold;
  const b = successes(before, threshold);
  const esDiff = pairedDifference(b, successes(after, threshold));
  const rsDiff = pairedDifference(b, successes(baseline.evaluation, threshold));
  const esVsRs = pairedDifference(successes(baseline.evaluation, threshold), successes(after, threshold));
  const demoKey = `${keys.run(run)}demo-report.json`;
  const report = DemoReport.parse({
    run,
    baselineRun,
    config,
    seeds: { run: config.seed, tasks: config.tasks.seed, model: 'preset' in config.model ? config.model.seed : config.model.dir },
    heldOut: { tasks: before.tasks, split: 'eval' },
    before: rate(before),
    es: {
      after: rate(after),
      difference: difference(esDiff),
      trainingEpisodes: es.report.totals.episodes,
      failedEpisodes: es.report.totals.failed,
      wallMs: esMs,
    },
    randomSearch: {
      after: rate(baseline.evaluation),
      difference: difference(rsDiff),
      trainingEpisodes: baseline.episodes,
      failedEpisodes: baseline.failedEpisodes,
      candidates: baseline.candidates,
      best: { round: baseline.best.round, member: baseline.best.member.index, trainReward: baseline.best.reward },
      wallMs: baselineMs,
    },
    esVersusRandomSearch: difference(esVsRs),
    requiredStandardErrors: REQUIRED_STANDARD_ERRORS,
    passed: esDiff.standardError > 0 && esDiff.improvement > REQUIRED_STANDARD_ERRORS * esDiff.standardError,
    files: { demoReport: join(storeRoot, demoKey), esReport: es.report.files.report, curve: es.report.files.curve },
    wallMs: performance.now() - started,
  });
  await new FsObjectStore(storeRoot).put(demoKey, JSON.stringify(report, null, 2), { contentType: 'application/json' });
  return report;
}
