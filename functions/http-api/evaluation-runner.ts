/**
 * Runs one pay-per-episode evaluation through the Fanout port, in waves, checking the budget between
 * waves: no wave starts past `maxEpisodes`, and with a `maxCostUsd` the first wave is a single episode (to
 * learn what one costs) and each later wave holds only as many episodes as the money left pays for at
 * the mean cost so far. The stop reason goes into the status, so the summary says why it stopped.
 */
import { pino, type Logger } from 'pino';
import type { CostPrices } from '../../shared/cost.ts';
import { keys } from '../../shared/keys.ts';
import type { EvaluationSecrets } from '../../shared/ports/launchers.ts';
import type { Fanout } from '../../shared/ports/fanout.ts';
import type { ModelHost, ServedModel } from '../../shared/ports/model-host.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { EvaluationStatus, RewardRecord, StoredEvaluationRequest, type EvaluationStopReason, type PolicyEndpoint } from '../../shared/schemas/index.ts';
import { loadEnvironment, parseWith } from '../../environments/index.ts';
import { evaluationEpisodeCost } from './evaluation-pricing.ts';
import { episodeRequest, planEpisode, type EvaluationPlanRecord } from './evaluation-plan.ts';
import { readJson, writeJson } from './store-json.ts';

/** The worker-side variable that carries the endpoint's bearer token (never the event). */
export const EVALUATION_TOKEN_ENV = 'ESOPT_EVALUATION_TOKEN';

export interface EvaluationRunnerDeps {
  store: ObjectStore;
  /** A fan-out whose workers have `env` in their environment; closed when the evaluation ends. */
  fanoutFor(env: Record<string, string>): Fanout;
  /** Serves base models and checkpoints; without one, only external models can be evaluated. */
  modelHost?: ModelHost;
  prices: CostPrices;
  log?: Logger;
}

async function resolveTasks(request: StoredEvaluationRequest): Promise<EvaluationPlanRecord['tasks']> {
  const definition = await loadEnvironment(request.environment.name);
  const options = parseWith(definition.optionsSchema, request.environment.options, `${definition.name} options`);
  if ('split' in request.tasks) return definition.sampleTasks(request.tasks.split, request.tasks.count, request.tasks.seed, options);
  return request.tasks.tasks.map((t) => ({ id: t.id, task: parseWith(definition.taskSchema, t.task, `${definition.name} task ${t.id}`) }));
}

export async function runEvaluation(deps: EvaluationRunnerDeps, id: string, secrets: EvaluationSecrets): Promise<void> {
  const { store, prices } = deps;
  const log = deps.log ?? pino({ name: 'esopt-evaluation' });
  const request = await readJson(store, keys.evaluationRequest(id), StoredEvaluationRequest);
  if (!request) throw new Error(`evaluation ${id} has no request in the store`);
  let status: EvaluationStatus = EvaluationStatus.parse(await readJson(store, keys.evaluationStatus(id), EvaluationStatus));
  const save = async (patch: Partial<EvaluationStatus>) => {
    status = { ...status, ...patch, updatedAt: new Date().toISOString() };
    await writeJson(store, keys.evaluationStatus(id), status);
  };

  let served: ServedModel | null = null;
  let fanout: Fanout | null = null;
  try {
    const tasks = await resolveTasks(request);
    const planned = Math.min(request.episodes, request.budget.maxEpisodes ?? Infinity);
    const plan: EvaluationPlanRecord = { tasks, planned };
    await writeJson(store, keys.evaluationPlan(id), plan);
    await save({ state: 'running', planned });

    let endpoint: { baseUrl: string; model: string; token?: string; tokenEnv?: string; guidedDecoding?: boolean };
    if (request.model.kind === 'external') {
      const { baseUrl, model, guidedDecoding } = request.model;
      endpoint = { baseUrl, model, guidedDecoding, ...(secrets.apiKey ? { token: secrets.apiKey } : {}) };
    } else {
      if (!deps.modelHost) throw new Error(`this deployment has no model host: it cannot serve a ${request.model.kind} model`);
      served = await deps.modelHost.serve(request.model);
      endpoint = served;
    }
    const policy: PolicyEndpoint = {
      baseUrl: endpoint.baseUrl,
      model: endpoint.model,
      ...(endpoint.guidedDecoding !== undefined ? { guidedDecoding: endpoint.guidedDecoding } : {}),
      ...(endpoint.tokenEnv ? { tokenEnv: endpoint.tokenEnv } : endpoint.token ? { tokenEnv: EVALUATION_TOKEN_ENV } : {}),
    };
    // A token the workers hold already (the trainer box's own) is not handed to them again.
    fanout = deps.fanoutFor(endpoint.token && !endpoint.tokenEnv ? { [EVALUATION_TOKEN_ENV]: endpoint.token } : {});

    const maxCost = request.budget.maxCostUsd;
    let spent = 0;
    let priced = 0;
    let stopReason: EvaluationStopReason = planned < request.episodes ? 'max-episodes' : 'completed';
    for (let next = 0; next < planned; ) {
      let size = Math.min(request.concurrency, planned - next);
      if (maxCost !== undefined) {
        if (priced === 0) size = 1;
        else {
          const mean = spent / priced;
          const affordable = mean > 0 ? Math.floor((maxCost - spent) / mean + 1e-9) : Infinity;
          if (spent >= maxCost || affordable < 1) {
            stopReason = 'max-cost';
            break;
          }
          size = Math.min(size, affordable);
        }
      }
      const wave = Array.from({ length: size }, (_, i) => planEpisode(id, tasks, next + i));
      const requests = wave.map((e) => episodeRequest(id, request, e, policy, e.index % tasks.length));
      const outcomes = await fanout.dispatch(requests, { concurrency: request.concurrency, timeoutMs: request.timeoutMs });
      for (const [i, episode] of wave.entries()) {
        let record = await readJson(store, episode.key, RewardRecord);
        if (!record) {
          // The worker died or timed out before writing: record the loss so the episode is counted, as failed.
          const lost: RewardRecord = RewardRecord.parse({
            run: id,
            iteration: episode.round,
            member: 'base',
            task: episode.task.id,
            reward: 0,
            steps: 0,
            tokens: { prompt: 0, completion: 0 },
            durations: { episodeMs: 0, inferenceMs: 0 },
            cost: { usd: 0, lambdaGbSeconds: 0, gpuSeconds: 0 },
            error: (outcomes[i]?.error ?? 'no record arrived').slice(0, 2000),
            writtenAt: new Date().toISOString(),
          });
          await writeJson(store, episode.key, lost, true);
          record = (await readJson(store, episode.key, RewardRecord)) ?? lost;
        }
        spent += evaluationEpisodeCost(record, request.model, prices).usd;
        priced++;
      }
      next += size;
      await save({ dispatched: next, waves: status.waves + 1 });
      log.info({ evaluation: id, dispatched: next, planned, spentUsd: spent }, 'evaluation wave done');
    }
    await save({ state: 'finished', stopReason, finishedAt: new Date().toISOString() });
  } catch (err) {
    const message = (err instanceof Error ? err.message : String(err)).slice(0, 4000);
    log.error({ evaluation: id, error: message }, 'evaluation failed');
    await save({ state: 'failed', error: message, finishedAt: new Date().toISOString() });
  } finally {
    await fanout?.close();
    await served?.close();
  }
}
