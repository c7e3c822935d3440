/**
 * Evaluations with screenshots, stored by the real Episode handler: the counter page (counter-page.ts), an
 * Environment that draws a real PNG of its state each step, stands in for a web page, loaded under the name
 * `web` by the test's mock of loadEnvironment. The evaluation's request, status and plan are written
 * as the evaluation runner writes them; every episode is played by `createEpisodeHandler` from the
 * `EpisodeRequest` that `episodeRequest` (functions/http-api/evaluation-plan.ts) makes — so records,
 * transcripts and frames are exactly what a deployment stores.
 */
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { keys } from '../../shared/keys.ts';
import { writeJson } from '../../shared/store/json.ts';
import { StoredEvaluationRequest, type EvaluationStatus } from '../../shared/schemas/index.ts';
import { createEpisodeHandler } from '../../functions/episode.ts';
import { episodeRequest, planEpisode, type EvaluationPlanRecord } from '../../functions/http-api/evaluation-plan.ts';
import type { CounterTask } from './counter-page.ts';

export { colourAt, counterDefinition, FRAME_SIZE, solidPng } from './counter-page.ts';

// ---------------------------------------------------------------- an evaluation, stored

export interface SeededEvaluation {
  id: string;
  tasks: Array<{ id: string; task: CounterTask }>;
}

/**
 * Writes evaluation `id` of the counter page and plays its `episodes` through the Episode handler: `agent`
 * picks the oracle (`good`) or the failing agent (`bad`); `usdPerMillionPromptTokens` prices it.
 */
export async function seedEvaluation(
  store: ObjectStore,
  options: { id: string; agent: 'good' | 'bad'; tasks: Array<{ id: string; task: CounterTask }>; episodes: number; usdPerMillionPromptTokens: number; createdAt?: string },
): Promise<SeededEvaluation> {
  const { id, tasks } = options;
  const createdAt = options.createdAt ?? new Date().toISOString();
  const request = StoredEvaluationRequest.parse({
    model: { kind: 'external', baseUrl: 'https://agents.example.com/v1', model: `${options.agent}-agent`, hasApiKey: false, pricing: { usdPerMillionPromptTokens: options.usdPerMillionPromptTokens, usdPerMillionCompletionTokens: 0 } },
    environment: { name: 'web', options: { observation: ['screenshot'] } },
    tasks: { tasks },
    episodes: options.episodes,
    createdAt,
  });
  await writeJson(store, keys.evaluationRequest(id), request, true);
  const plan: EvaluationPlanRecord = { tasks, planned: options.episodes };
  await writeJson(store, keys.evaluationPlan(id), plan);
  const handler = createEpisodeHandler({
    store,
    env: {},
    memoryMb: 0,
    billedPerInvocation: false,
    prices: { lambdaUsdPerGbSecond: 0, lambdaUsdPerRequest: 0, gpuUsdPerHour: 0, gpuSecondsPerToken: 0 },
    log: { info: () => undefined, error: () => undefined },
  });
  const policy = { baseUrl: options.agent === 'good' ? 'scripted:oracle' : 'scripted:random', model: `${options.agent}-agent` };
  for (let index = 0; index < options.episodes; index++) {
    const planned = planEpisode(id, tasks, index);
    const response = await handler(episodeRequest(id, request, planned, policy, index % tasks.length));
    if (!response.ok || response.outcomes[0]?.written !== true) throw new Error(`episode ${index} of ${id} was not written: ${JSON.stringify(response)}`);
  }
  const now = new Date().toISOString();
  const status: EvaluationStatus = { id, state: 'finished', stopReason: 'completed', planned: options.episodes, dispatched: options.episodes, waves: 1, error: null, updatedAt: now, finishedAt: now };
  await writeJson(store, keys.evaluationStatus(id), status);
  return { id, tasks };
}
