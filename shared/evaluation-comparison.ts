/**
 * Several agents' result files on the same tasks, judged the same way, as success against cost per
 * episode, with the Pareto frontier marked: an evaluation is dominated when another has a success rate at
 * least as high and a cost per episode at most as high, and is better in one of the two (point estimates;
 * the intervals are shown beside them, so a reader sees when a "better" is within the noise). Files of other
 * tasks (`suite.tasksSha256`, the environment) or of another judge (`judge`) are refused, naming which and
 * why, as is a file with no episode yet: it has no rate and no cost to place.
 *
 * Pure: the API's `GET /evaluations/compare` and `esopt evals compare` (over the API or over result files
 * another team sent) both compute it here.
 */
import { RESULT_FILE_VERSION, type ComparedEvaluation, type EvaluationComparison, type EvaluationResultFile, type JudgeRef, type SuiteRef } from './schemas/index.ts';
import type { FieldIssue } from './validation.ts';

export type ComparisonOutcome = { ok: true; comparison: EvaluationComparison } | { ok: false; issues: FieldIssue[] };

function suiteText(s: SuiteRef): string {
  return `${s.environment} tasks "${s.name}"${s.manifest ? ` (manifest ${s.manifest.slice(0, 12)})` : ''}, ${s.tasks} task(s), tasks sha256 ${s.tasksSha256.slice(0, 12)}`;
}

function judgeText(j: JudgeRef): string {
  return `${j.environment} judge v${j.version}, success at reward ≥ ${j.successThreshold}`;
}

const sameJudge = (a: JudgeRef, b: JudgeRef) => a.environment === b.environment && a.version === b.version && a.successThreshold === b.successThreshold;

/** `path` names where each file came from in the caller's terms (`ids.2`, `files.2`). */
export function compareEvaluations(files: readonly EvaluationResultFile[], path = 'ids'): ComparisonOutcome {
  const issues: FieldIssue[] = [];
  if (files.length < 2) issues.push({ path, message: `compare at least 2 evaluations (${files.length} given)` });
  const seen = new Map<string, number>();
  files.forEach((f, n) => {
    const at = `${path}.${n}`;
    const first = seen.get(f.evaluation);
    if (first !== undefined) issues.push({ path: at, message: `${f.evaluation} is given twice (also at ${path}.${first})` });
    seen.set(f.evaluation, n);
    if (f.summary.episodes === 0) issues.push({ path: at, message: `${f.evaluation} has no episodes yet: nothing to place` });
    const base = files[0]!;
    if (n === 0) return;
    if (f.suite.tasksSha256 !== base.suite.tasksSha256 || f.suite.environment !== base.suite.environment) {
      issues.push({ path: at, message: `${f.evaluation} played other tasks than ${base.evaluation}: ${suiteText(f.suite)}, not ${suiteText(base.suite)}` });
    }
    if (!sameJudge(f.judge, base.judge)) issues.push({ path: at, message: `${f.evaluation} was judged otherwise than ${base.evaluation}: ${judgeText(f.judge)}, not ${judgeText(base.judge)}` });
  });
  if (issues.length) return { ok: false, issues };

  const points = files.map((f) => ({ id: f.evaluation, rate: f.summary.successRate, cost: f.summary.meanCostUsdPerEpisode ?? 0 }));
  const evaluations: ComparedEvaluation[] = files.map((f, n) => {
    const me = points[n]!;
    const dominatedBy = points.filter((o) => o.id !== me.id && o.rate >= me.rate && o.cost <= me.cost && (o.rate > me.rate || o.cost < me.cost)).map((o) => o.id);
    return {
      id: f.evaluation,
      model: f.model,
      state: f.state,
      environmentOptions: f.environmentOptions,
      episodes: f.summary.episodes,
      successes: f.summary.successes,
      successRate: f.summary.successRate,
      interval: f.summary.interval,
      meanCostUsdPerEpisode: me.cost,
      totalCostUsd: f.summary.totalCostUsd,
      frontier: dominatedBy.length === 0,
      dominatedBy,
    };
  });
  const frontier = evaluations
    .filter((e) => e.frontier)
    .sort((a, b) => a.meanCostUsdPerEpisode - b.meanCostUsdPerEpisode || b.successRate - a.successRate)
    .map((e) => e.id);
  return { ok: true, comparison: { version: RESULT_FILE_VERSION, suite: files[0]!.suite, judge: files[0]!.judge, evaluations, frontier } };
}
