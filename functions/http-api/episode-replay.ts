/**
 * An evaluation episode's replay (`GET /evaluations/{id}/episodes/{index}`) and its frames
 * (`…/frames/{step}`), from the records and transcripts the Episode function stored. Only the evaluation's
 * own objects are ever read: a transcript key must lie under the evaluation's prefix, and a frame key must be
 * exactly `keys.frame(id, round, 'base', task, attempt, step)` for the episode and step asked for, so nothing
 * a record or transcript says can make these routes read elsewhere in the store.
 */
import type { CostPrices } from '../../shared/cost.ts';
import { keys } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { RewardRecord, StoredEvaluationRequest, type EpisodeReplay, type ReplayStep, type EvaluationEpisode } from '../../shared/schemas/index.ts';
import { readJson } from '../../shared/store/json.ts';
import { StoredTranscript } from '../episode-transcript.ts';
import { ApiProblem, notFound } from './errors.ts';
import { EvaluationPlanRecord, planEpisode } from './evaluation-plan.ts';
import { episodeOf, transcriptPath } from './evaluation-reader.ts';

export function episodePath(id: string, index: number): string {
  return `/evaluations/${id}/episodes/${index}`;
}

export function framePath(id: string, index: number, step: number): string {
  return `${episodePath(id, index)}/frames/${step}`;
}

/**
 * The episode's record, or 404 for an evaluation or an episode that is not (yet) there. Read by its key from
 * the plan (episode i plays task i mod n in round ⌊i/n⌋), not by listing: each frame of a replay asks again.
 */
async function findEpisode(store: ObjectStore, id: string, index: number, prices: CostPrices): Promise<{ episode: EvaluationEpisode; record: RewardRecord }> {
  const [request, plan] = await Promise.all([readJson(store, keys.evaluationRequest(id), StoredEvaluationRequest), readJson(store, keys.evaluationPlan(id), EvaluationPlanRecord)]);
  if (!request) throw notFound('evaluation', id);
  // Past the planned episodes there is no record to look for (and no round a key could name).
  const record = plan && index < plan.planned ? await readJson(store, planEpisode(id, plan.tasks, index).key, RewardRecord) : null;
  if (!plan || !record) throw notFound('episode', `${id}/${index}`);
  return { episode: episodeOf(id, request, record, index, prices), record };
}

/** The episode's stored transcript; 404 `no_transcript` when its record names none under the evaluation's prefix. */
export async function readEpisodeTranscript(store: ObjectStore, id: string, index: number, prices: CostPrices): Promise<{ episode: EvaluationEpisode; record: RewardRecord; transcript: StoredTranscript }> {
  const found = await findEpisode(store, id, index, prices);
  const key = found.record.transcriptKey;
  const transcript = key && key.startsWith(keys.run(id)) ? await readJson(store, key, StoredTranscript) : null;
  if (!transcript) throw new ApiProblem(404, 'no_transcript', `episode ${index} of ${id} has no stored transcript`);
  return { ...found, transcript };
}

function stepError(info: Record<string, unknown> | undefined): string | null {
  const error = info?.error;
  return typeof error === 'string' ? error : null;
}

export async function readReplay(store: ObjectStore, id: string, index: number, prices: CostPrices): Promise<EpisodeReplay> {
  const { episode, transcript } = await readEpisodeTranscript(store, id, index, prices);
  const actions = new Map<number, { text: string; toolCalls?: Array<{ name: string; arguments: unknown }> }>();
  let system: string | null = null;
  for (const e of transcript.entries) {
    if (e.kind === 'system') system ??= e.text;
    // The action taken at step k is the one taken on seeing observation k.
    if (e.kind === 'action') actions.set(e.step, { text: e.text, ...(e.toolCalls ? { toolCalls: e.toolCalls } : {}) });
  }
  const steps: ReplayStep[] = transcript.entries.flatMap((e) =>
    e.kind !== 'observation'
      ? []
      : [{ step: e.step, observation: e.text, done: e.done, reward: e.reward ?? null, error: stepError(e.info), action: actions.get(e.step) ?? null, frame: e.frame ? framePath(id, index, e.step) : null }],
  );
  return {
    evaluation: id,
    index,
    task: episode.task,
    round: episode.round,
    reward: episode.reward,
    success: episode.success,
    error: episode.error,
    system,
    steps,
    truncated: transcript.truncated?.note ?? null,
    frames: transcript.frames ?? null,
    transcript: transcriptPath(id, index),
  };
}

/** The PNG of step `step` of the episode; 404 `no_frame` where none was kept. */
export async function readFrame(store: ObjectStore, id: string, index: number, step: number, prices: CostPrices): Promise<Uint8Array> {
  const { record, transcript } = await readEpisodeTranscript(store, id, index, prices);
  const named = transcript.entries.find((e) => e.kind === 'observation' && e.step === step);
  const key = named?.kind === 'observation' ? named.frame : undefined;
  const attempt = key ? /\/([A-Za-z0-9][A-Za-z0-9_-]{0,63})\/\d{5}\.png$/.exec(key)?.[1] : undefined;
  const expected = attempt ? keys.frame(id, record.iteration, 'base', record.task, attempt, step) : undefined;
  const bytes = key !== undefined && key === expected ? await store.get(key) : null;
  if (!bytes) throw new ApiProblem(404, 'no_frame', `step ${step} of episode ${index} of ${id} has no stored screenshot`);
  return bytes;
}
