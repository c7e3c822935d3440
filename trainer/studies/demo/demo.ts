/**
 * What `npm start` runs: the ES training run of a config through the embedded trainer (store, inference
 * server, local worker pool, ES loop), then two baselines with the same training-episode budget, each from
 * a fresh copy of θ₀ — best-of-N random search (random-search.ts) and GRPO (trainer/studies/grpo) — then one report
 * comparing all three on the same held-out tasks with paired standard errors. The ES run's own report and
 * curve are written by the loop (trainer/assembly/run.ts); this adds `demo-report.json` next to them.
 */
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import { z } from 'zod';
import { keys } from '../../../shared/keys.ts';
import type { EvaluationResult } from '../../../shared/schemas/index.ts';
import { storeAt } from '../../assembly/stores.ts';
import { Provenance, provenance } from '../../training/provenance.ts';
import { writeJson } from '../../../shared/store/json.ts';
import { wilsonInterval } from '../../../shared/wilson.ts';
import { loadEnvironment } from '../../../environments/index.ts';
import { runGrpo } from '../grpo/grpo.ts';
import { openStudyRun, runEmbedded } from '../../assembly/run.ts';
import type { TrainingProgress } from '../../training/loop/index.ts';
import { DemoConfig } from './demo-config.ts';
import { pairedDifference, type PairedDifference } from './paired-difference.ts';
import { randomSearch } from './random-search.ts';
import { renderComparison } from '../charts/comparison-svg.ts';

/** How many standard errors the ES improvement must clear for the demo to count as a success. */
export const REQUIRED_STANDARD_ERRORS = 3;

/**
 * The verdict: ES's paired gain over θ₀ above REQUIRED_STANDARD_ERRORS standard errors, with every held-out
 * episode of both evaluations played — a failed one counts unsolved, so failures at θ₀ would make a gain.
 */
/** What was found, in one sentence: ES against the base and the bar it had to clear, then the baselines. */
export function verdictSentence(r: Pick<DemoReport, 'passed' | 'before' | 'es' | 'randomSearch' | 'grpo' | 'requiredStandardErrors' | 'heldOut'>): string {
  const d = r.es.difference;
  const z = d.standardErrors ?? 0;
  const points = `${d.improvement >= 0 ? '+' : '−'}${Math.abs(d.improvement * 100).toFixed(1)} points`;
  const moved = `${Math.abs(z).toFixed(1)} standard errors ${z >= 0 ? 'above' : 'below'} the base`;
  const found = r.passed
    ? `ES learned something that carries over to unseen tasks`
    : d.improvement > 0
      ? `ES's gain is too small to tell from chance`
      : `ES did not improve on unseen tasks`;
  return `${r.passed ? 'PASSED' : 'NOT PASSED'}: after ${r.es.trainingEpisodes.toLocaleString('en-US')} training episodes ES solved ${r.es.after.successes} of ${r.heldOut.tasks} unseen tasks against the base's ${r.before.successes} (${points}, ${moved}; passing needs ${r.requiredStandardErrors} above), so ${found}; with the same episodes random search solved ${r.randomSearch.after.successes} and GRPO ${r.grpo.after.successes}.`;
}

export function esPassed(d: Pick<PairedDifference, 'improvement' | 'standardError'>, failed: { before: number; after: number }): boolean {
  return failed.before === 0 && failed.after === 0 && d.standardError > 0 && d.improvement > REQUIRED_STANDARD_ERRORS * d.standardError;
}

/** `failed`: held-out episodes that ended in an error (a deadline, a refused request): counted unsolved. */
const Rate = z.object({ successRate: z.number(), successes: z.number().int(), tasks: z.number().int(), failed: z.number().int().min(0), interval: z.object({ low: z.number(), high: z.number() }) });
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
  runs: z.object({ randomSearch: z.string(), grpo: z.string() }),
  config: DemoConfig,
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
  grpo: z.object({
    after: Rate,
    difference: Difference,
    trainingEpisodes: z.number().int(),
    /** Mean sampled training reward per step (the rollouts GRPO learned from). */
    trainReward: z.array(z.number()),
    wallMs: z.number(),
  }),
  /** ES after − random search after, paired on the same held-out tasks. */
  esVersusRandomSearch: Difference,
  /** ES after − GRPO after, paired on the same held-out tasks. */
  esVersusGrpo: Difference,
  requiredStandardErrors: z.number(),
  passed: z.boolean(),
  /** The verdict in one sentence a newcomer can follow. */
  verdict: z.string(),
  files: z.object({ demoReport: z.string(), esReport: z.string(), curve: z.string(), comparison: z.string() }),
  wallMs: z.number(),
  /** The commit, date and load it was made at. */
  made: Provenance,
});
export type DemoReport = z.infer<typeof DemoReport>;

export interface DemoOptions {
  demo: DemoConfig;
  run: string;
  storeRoot: string;
  progress: TrainingProgress;
  /** Show the random-search rounds and GRPO steps as bars on stderr. */
  showBaselineProgress: boolean;
}

function successes(e: EvaluationResult, threshold: number): boolean[] {
  return e.perTask.map((p) => p.error === null && p.reward >= threshold);
}

function rate(e: EvaluationResult): z.infer<typeof Rate> {
  return { successRate: e.successRate, successes: e.successes, tasks: e.tasks, failed: e.failed, interval: wilsonInterval(e.successes, e.tasks) };
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

function progressBar(show: boolean, format: string): cliProgress.SingleBar | null {
  return show ? new cliProgress.SingleBar({ stream: process.stderr, format, noTTYOutput: true, notTTYSchedule: 5000, hideCursor: true }, cliProgress.Presets.shades_classic) : null;
}

export async function runDemo(o: DemoOptions): Promise<DemoReport> {
  const { demo, run, storeRoot } = o;
  const config = demo.run;
  const started = performance.now();
  const es = await runEmbedded({ config, run, storeRoot, progress: o.progress });
  const evaluations = es.result.evaluations;
  const before = evaluations.find((e) => e.iteration === 0);
  const after = evaluations.find((e) => e.iteration === config.iterations);
  if (!before || !after) throw new Error(`run ${run} has no evaluation of θ_0 or θ_${config.iterations}`);
  const esMs = performance.now() - started;

  // The control: same budget, same members and tasks per round, a fresh θ₀, nothing learned.
  const runs = { randomSearch: `${run}-random-search`, grpo: `${run}-grpo` };
  const environment = await loadEnvironment(config.environment.name);
  // The loop's held-out sample, drawn again the same way (deterministic in the seed), checked by id.
  const options = environment.optionsSchema.parse(config.environment.options);
  const heldOut = environment.sampleTasks('eval', config.tasks.evalCount, config.tasks.seed, options).map((t) => ({ id: t.id, task: t.task }));
  if (heldOut.some((t, i) => t.id !== before.perTask[i]?.task)) throw new Error('the held-out tasks drawn for the control differ from the ES run\'s evaluation tasks');
  const { engine, server, site, close } = await openStudyRun(config, storeRoot);
  const bar = progressBar(o.showBaselineProgress, 'random search |{bar}| round {value}/{total} | best train reward {best} | ETA {eta_formatted}');
  const baselineStarted = performance.now();
  // Training curves for the comparison chart: success against training episodes.
  const perRound = config.es.population * config.tasks.trainPerIteration;
  const rsCurve: Array<[number, number]> = [];
  let baseline;
  try {
    bar?.start(config.iterations, 0, { best: '–' });
    baseline = await randomSearch({
      run: runs.randomSearch,
      config,
      store: site.store,
      fanout: site.fanout,
      engine,
      population: server.service,
      policy: { baseUrl: `${server.url}/v1` },
      environment,
      evalTasks: heldOut,
      onRound: (round, best) => {
        rsCurve.push([(round + 1) * perRound, best.reward]);
        bar?.update(round + 1, { best: best.reward.toFixed(3) });
      },
    });
  } finally {
    bar?.stop();
    await close();
  }
  const baselineMs = performance.now() - baselineStarted;

  // The gradient baseline: GRPO steps on the same training tasks, G = population rollouts of each.
  const grpoBar = progressBar(o.showBaselineProgress, 'GRPO |{bar}| step {value}/{total} | sampled train reward {reward} | ETA {eta_formatted}');
  const grpoStarted = performance.now();
  let grpo;
  try {
    grpoBar?.start(config.iterations, 0, { reward: '–' });
    grpo = await runGrpo({ config, grpo: demo.grpo, run: runs.grpo, storeRoot, evalTasks: heldOut, onStep: (s) => grpoBar?.update(s.step + 1, { reward: s.meanReward.toFixed(3) }) });
  } finally {
    grpoBar?.stop();
  }
  const grpoMs = performance.now() - grpoStarted;

  const threshold = config.successThreshold;
  const b = successes(before, threshold);
  const esDiff = pairedDifference(b, successes(after, threshold));
  const rsDiff = pairedDifference(b, successes(baseline.evaluation, threshold));
  const gDiff = pairedDifference(b, successes(grpo.evaluation, threshold));
  const esVsRs = pairedDifference(successes(baseline.evaluation, threshold), successes(after, threshold));
  const esVsGrpo = pairedDifference(successes(grpo.evaluation, threshold), successes(after, threshold));
  const demoKey = `${keys.run(run)}demo-report.json`;
  const comparisonPath = join(storeRoot, `${keys.run(run)}comparison.svg`);
  const report = DemoReport.parse({
    run,
    runs,
    config: demo,
    seeds: { run: config.seed, tasks: config.tasks.seed, model: 'preset' in config.model ? config.model.seed : 'dir' in config.model ? config.model.dir : config.model.name },
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
    grpo: {
      after: rate(grpo.evaluation),
      difference: difference(gDiff),
      trainingEpisodes: grpo.episodes,
      trainReward: grpo.history.map((h) => h.meanReward),
      wallMs: grpoMs,
    },
    esVersusRandomSearch: difference(esVsRs),
    esVersusGrpo: difference(esVsGrpo),
    requiredStandardErrors: REQUIRED_STANDARD_ERRORS,
    passed: esPassed(esDiff, { before: before.failed, after: after.failed }),
    verdict: '',
    files: { demoReport: join(storeRoot, demoKey), esReport: es.report.files.report, curve: es.report.files.curve, comparison: comparisonPath },
    wallMs: performance.now() - started,
    made: provenance(),
  });
  report.verdict = verdictSentence(report);
  const perStep = grpo.history.length ? grpo.episodes / grpo.history.length : 0;
  const rate95 = (r: z.infer<typeof Rate>) => ({ successRate: r.successRate, low: r.interval.low, high: r.interval.high });
  let esEpisodes = 0;
  const comparison = renderComparison({
    title: `${config.environment.name}: ES against random search and GRPO, same training episodes`,
    subtitle: report.verdict,
    xLabel: 'training episodes',
    curves: {
      es: es.result.rows.flatMap((r) => (r.successRate === null ? [] : [[(esEpisodes += r.expected), r.successRate] as [number, number]])),
      randomSearch: rsCurve,
      grpo: grpo.history.map((s, i) => [(i + 1) * perStep, s.meanReward] as [number, number]),
    },
    heldOut: { base: rate95(report.before), es: rate95(report.es.after), randomSearch: rate95(report.randomSearch.after), grpo: rate95(report.grpo.after) },
    budget: report.es.trainingEpisodes,
  });
  const store = storeAt(storeRoot);
  await store.put(`${keys.run(run)}comparison.svg`, comparison, { contentType: 'image/svg+xml' });
  await writeJson(store, demoKey, report, false, { pretty: true });
  return report;
}
