/**
 * Runs one pay-per-episode evaluation through the Fanout port, in waves, checking the budget between
 * waves: no wave starts past `maxEpisodes`, and with a `maxCostUsd` the first wave is a single episode (to
 * learn what one costs) and each later wave holds only as many episodes as the money left pays for at
 * the mean cost so far. The stop reason goes into the status, so the summary says why it stopped.
 *
 * A queued evaluation's endpoint key stays in the secret store: the episodes name it (`tokenParameter`),
 * the workers read it, an episode that could not use it (gone, or bound to another origin) fails the
 * whole evaluation after its wave, and the secret is deleted when the evaluation ends, however it ends.
 */
import { pino, type Logger } from 'pino';
import type { CostPrices } from '../../shared/cost.ts';
import { keys } from '../../shared/keys.ts';
import type { EvaluationSecrets } from '../../shared/ports/launchers.ts';
import type { Fanout } from '../../shared/ports/fanout.ts';
import type { ModelServer, ServedModel } from '../../shared/ports/model-server.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { SecretStore } from '../../shared/ports/secret-store.ts';
import { EVALUATION_KEY_ERROR } from '../../shared/secrets/evaluation-key.ts';
import { EvaluationStatus, RewardRecord, StoredEvaluationRequest, type EpisodeInstructions, type EvaluationStopReason, type PolicyEndpoint } from '../../shared/schemas/index.ts';
import { resolveInstructions } from '../../shared/instructions-catalog.ts';
import { loadEnvironment, parseWith } from '../../environments/index.ts';
import type { Split } from '../../environments/environment.ts';
import { readSuite } from '../../environments/task-suites/suite-catalog.ts';
import { sampleSuite } from '../../environments/task-suites/sample-suite.ts';
import { evaluationEpisodeCost } from '../../functions/http-api/evaluation-pricing.ts';
import { episodeRequest, planEpisode, type EvaluationPlanRecord } from '../../functions/http-api/evaluation-plan.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';

/** The worker-side variable that carries the endpoint's bearer token (never the event). */
export const EVALUATION_TOKEN_ENV = 'ESOPT_EVALUATION_TOKEN';

export interface EvaluationRunnerDeps {
  store: ObjectStore;
  /** A fan-out whose workers have `env` in their environment; closed when the evaluation ends. */
  fanoutFor(env: Record<string, string>): Fanout;
  /** Serves base models and checkpoints; without one, only external models can be evaluated. */
  modelServer?: ModelServer;
  prices: CostPrices;
  log?: Logger;
  /** Where queued evaluations' keys are (`EvaluationSecrets.apiKeyRef`): deleted here when the evaluation ends. */
  secrets?: SecretStore;
}

/** A suite's tasks come from the manifest the API pinned at creation, never from the name's current one. */
async function suiteTasks(store: ObjectStore, request: StoredEvaluationRequest, set: { suite: { name: string; manifest?: string }; split: Split; count: number; seed: number }): Promise<EvaluationPlanRecord['tasks']> {
  const { name, manifest } = set.suite;
  if (manifest === undefined) throw new Error(`tasks.suite ${name} is not pinned to a manifest (the API pins it when the evaluation is created)`);
  const suite = await readSuite(store, manifest);
  if (!suite) throw new Error(`tasks.suite.manifest: no task suite ${manifest} in the store`);
  if (suite.environment !== request.environment.name) throw new Error(`tasks.suite: ${name} holds ${suite.environment} tasks, not ${request.environment.name} tasks`);
  return sampleSuite({ name, tasks: suite.tasks }, set.split, set.count, set.seed);
}

async function resolveTasks(store: ObjectStore, request: StoredEvaluationRequest): Promise<EvaluationPlanRecord['tasks']> {
  if ('suite' in request.tasks) return suiteTasks(store, request, request.tasks);
  const definition = await loadEnvironment(request.environment.name);
  const options = parseWith(definition.optionsSchema, request.environment.options, `${definition.name} options`);
  if ('split' in request.tasks) return definition.sampleTasks(request.tasks.split, request.tasks.count, request.tasks.seed, options);
  return request.tasks.tasks.map((t) => ({ id: t.id, task: parseWith(definition.taskSchema, t.task, `${definition.name} task ${t.id}`) }));
}

/** The instructions the API pinned, read once: every episode request carries their documents. */
async function evaluationInstructions(store: ObjectStore, request: StoredEvaluationRequest): Promise<EpisodeInstructions | undefined> {
  const ref = request.instructions;
  if (!ref) return undefined;
  if (ref.manifest === undefined) throw new Error(`instructions ${ref.name} are not pinned to a manifest (the API pins them when the evaluation is created)`);
  return resolveInstructions(store, { name: ref.name, manifest: ref.manifest });
}

/** The key's secret is gone once its evaluation ends; if deleting fails, its Expiration still removes it. */
async function deleteKey(deps: EvaluationRunnerDeps, parameter: string, log: Logger): Promise<void> {
  try {
    if (!deps.secrets) throw new Error('this runner has no secret store');
    await deps.secrets.delete(parameter);
    log.info({ parameter }, 'evaluation key deleted');
  } catch (err) {
    log.error({ parameter, error: (err as Error).message }, 'evaluation key not deleted: it expires by itself');
  }
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
    const tasks = await resolveTasks(store, request);
    const instructions = await evaluationInstructions(store, request);
    const planned = Math.min(request.episodes, request.budget.maxEpisodes ?? Infinity);
    const plan: EvaluationPlanRecord = { tasks, planned };
    await writeJson(store, keys.evaluationPlan(id), plan);
    await save({ state: 'running', planned });

    let endpoint: { baseUrl: string; model: string; token?: string; tokenEnv?: string; tokenParameter?: string; guidedDecoding?: boolean };
    if (request.model.kind === 'external') {
      const { baseUrl, model, guidedDecoding } = request.model;
      const ref = secrets.apiKeyRef;
      if (ref && ref.origin !== new URL(baseUrl).origin) throw new Error(`${EVALUATION_KEY_ERROR} ${ref.parameter} is for ${ref.origin}, not for the endpoint ${new URL(baseUrl).origin}`);
      endpoint = { baseUrl, model, guidedDecoding, ...(secrets.apiKey ? { token: secrets.apiKey } : {}), ...(ref ? { tokenParameter: ref.parameter } : {}) };
    } else {
      if (!deps.modelServer) throw new Error(`this deployment has no model host: it cannot serve a ${request.model.kind} model`);
      served = await deps.modelServer.serve(request.model);
      endpoint = served;
    }
    const policy: PolicyEndpoint = {
      baseUrl: endpoint.baseUrl,
      model: endpoint.model,
      ...(endpoint.guidedDecoding !== undefined ? { guidedDecoding: endpoint.guidedDecoding } : {}),
      ...(endpoint.tokenEnv ? { tokenEnv: endpoint.tokenEnv } : endpoint.token ? { tokenEnv: EVALUATION_TOKEN_ENV } : {}),
      ...(endpoint.tokenParameter ? { tokenParameter: endpoint.tokenParameter } : {}),
    };
    // A token the workers hold already (the trainer box's own) is not handed to them again.
    fanout = deps.fanoutFor(endpoint.token && !endpoint.tokenEnv ? { [EVALUATION_TOKEN_ENV]: endpoint.token } : {});

    const maxCost = request.budget.maxCostUsd;
    let spent = 0;
    let priced = 0;
    let keyError: string | null = null;
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
      const requests = wave.map((e) => episodeRequest(id, request, e, policy, e.index % tasks.length, Date.now(), instructions));
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
        if (record.error?.startsWith(EVALUATION_KEY_ERROR)) keyError ??= record.error;
        spent += evaluationEpisodeCost(record, request.model, prices).usd;
        priced++;
      }
      next += size;
      await save({ dispatched: next, waves: status.waves + 1 });
      // Every later episode would meet the same missing or misbound key.
      if (keyError) throw new Error(keyError);
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
    if (secrets.apiKeyRef) await deleteKey(deps, secrets.apiKeyRef.parameter, log);
  }
}
