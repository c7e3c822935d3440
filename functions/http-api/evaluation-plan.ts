/**
 * An evaluation's episodes as EpisodeRequests. Episode i plays task i mod n in round ⌊i / n⌋; its record
 * lands at `keys.reward(id, round, 'base', task)` — the evaluation id stands in for the run, the round
 * for the iteration — so every episode has its own create-only key and a re-delivered one is skipped.
 */
import { z } from 'zod';
import { keys } from '../../shared/keys.ts';
import { TaskId, type EpisodeInstructions, type EpisodeRequest, type PolicyEndpoint, type StoredEvaluationRequest } from '../../shared/schemas/index.ts';
import { deriveSeed } from '../../environments/random.ts';

export interface PlannedEpisode {
  index: number;
  round: number;
  task: { id: string; task: unknown };
  key: string;
}

export function planEpisode(id: string, tasks: readonly { id: string; task: unknown }[], index: number): PlannedEpisode {
  const round = Math.floor(index / tasks.length);
  const task = tasks[index % tasks.length];
  return { index, round, task, key: keys.reward(id, round, 'base', task.id) };
}

/** `instructions`: the request's pinned instructions with their documents (the runner reads them once). */
export function episodeRequest(id: string, request: StoredEvaluationRequest, episode: PlannedEpisode, policy: PolicyEndpoint, taskIndex: number, now = Date.now(), instructions?: EpisodeInstructions): EpisodeRequest {
  return {
    run: id,
    iteration: episode.round,
    member: 'base',
    task: { id: episode.task.id, value: episode.task.task },
    environment: request.environment,
    policy,
    generation: request.generation,
    seed: deriveSeed(request.seed, episode.round, taskIndex),
    deadline: new Date(now + request.timeoutMs).toISOString(),
    ...(instructions ? { instructions } : {}),
  };
}

/** Stored at `keys.evaluationPlan(id)` once the task set is resolved. */
export const EvaluationPlanRecord = z.object({ tasks: z.array(z.object({ id: TaskId, task: z.unknown() })).min(1), planned: z.number().int().min(0) });
export type EvaluationPlanRecord = z.infer<typeof EvaluationPlanRecord>;
