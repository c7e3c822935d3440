/**
 * An evaluation's result file (`GET /evaluations/{id}/result`, shared/schemas/evaluation-results.ts), read
 * from the store as the evaluation's view is: the request, its plan (the tasks, in the order played) and every
 * episode's record, priced and summed up by the same code (evaluation-reader.ts), so the file and
 * `GET /evaluations/{id}` never disagree.
 */
import { canonicalSha256 } from '../../shared/canonical-json.ts';
import type { CostPrices } from '../../shared/cost.ts';
import { keys } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { EvaluationStatus, RESULT_FILE_VERSION, StoredEvaluationRequest, type EvaluationResultFile, type SuiteRef } from '../../shared/schemas/index.ts';
import { readJson } from '../../shared/store/json.ts';
import { judgeVersion } from '../../environments/judge-versions.ts';
import { ApiProblem, notFound } from './errors.ts';
import { EvaluationPlanRecord } from './evaluation-plan.ts';
import { readEpisodes, summarize } from './evaluation-reader.ts';

function suiteOf(request: StoredEvaluationRequest, plan: EvaluationPlanRecord, taskHashes: Array<{ id: string; sha256: string }>): SuiteRef {
  const set = request.tasks;
  const environment = request.environment.name;
  const common = { environment, tasks: plan.tasks.length, tasksSha256: canonicalSha256(taskHashes) };
  if ('suite' in set) return { name: set.suite.name, manifest: set.suite.manifest ?? null, split: set.split, ...common };
  if ('split' in set) return { name: `${environment} ${set.split} split, seed ${set.seed}`, manifest: null, split: set.split, ...common };
  return { name: 'explicit tasks', manifest: null, split: null, ...common };
}

export async function readResultFile(store: ObjectStore, id: string, prices: CostPrices): Promise<EvaluationResultFile> {
  const [request, status, plan] = await Promise.all([
    readJson(store, keys.evaluationRequest(id), StoredEvaluationRequest),
    readJson(store, keys.evaluationStatus(id), EvaluationStatus),
    readJson(store, keys.evaluationPlan(id), EvaluationPlanRecord),
  ]);
  if (!request || !status) throw notFound('evaluation', id);
  if (!plan) throw new ApiProblem(409, 'not_planned', `evaluation ${id} has not resolved its tasks yet (${status.state}): its result file has no tasks to name`);
  const episodes = (await readEpisodes(store, id, request, plan, prices)).map((e) => e.episode);
  const summary = summarize(request, status, episodes);
  const taskHashes = plan.tasks.map((t) => ({ id: t.id, sha256: canonicalSha256(t.task) }));
  const byTask = new Map<string, typeof episodes>();
  for (const e of episodes) {
    const list = byTask.get(e.task);
    if (list) list.push(e);
    else byTask.set(e.task, [e]);
  }
  return {
    version: RESULT_FILE_VERSION,
    evaluation: id,
    createdAt: request.createdAt,
    state: status.state,
    stopReason: status.stopReason,
    model: request.model,
    environmentOptions: request.environment.options,
    instructions: request.instructions ? { name: request.instructions.name, manifest: request.instructions.manifest ?? null } : null,
    suite: suiteOf(request, plan, taskHashes),
    judge: { environment: request.environment.name, version: judgeVersion(request.environment.name), successThreshold: request.successThreshold },
    summary: {
      episodes: summary.episodes,
      successes: summary.successes,
      failed: summary.failed,
      successRate: summary.successRate,
      interval: summary.interval,
      meanReward: summary.meanReward,
      totalCostUsd: summary.totalCostUsd,
      meanCostUsdPerEpisode: summary.meanCostUsdPerEpisode,
    },
    tasks: taskHashes.map((t) => ({
      ...t,
      episodes: (byTask.get(t.id) ?? []).map((e) => ({ index: e.index, round: e.round, reward: e.reward, success: e.success, steps: e.steps, error: e.error, costUsd: e.cost.usd })),
    })),
  };
}
