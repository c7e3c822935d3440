/**
 * What the Episode function is sent and what it answers: one EpisodeRequest, or several in one
 * invocation (fewer invocations, fewer request fees, episodes sharing the function's wait on inference).
 */
import { z } from 'zod';
import { EpisodeRequest } from '../shared/schemas/index.ts';

/** Most episodes one invocation may carry: they run concurrently inside one function instance. */
export const MAX_EPISODES_PER_INVOCATION = 64;

export const EpisodeBatch = z.object({ episodes: z.array(EpisodeRequest).min(1).max(MAX_EPISODES_PER_INVOCATION) }).strict();
export const EpisodeEvent = z.union([EpisodeRequest, EpisodeBatch]);
export type EpisodeEvent = z.input<typeof EpisodeEvent>;

/** Parses against the one shape the event claims (`episodes` or not), so errors name its field paths. */
export function parseEpisodeEvent(event: unknown) {
  const claimsBatch = typeof event === 'object' && event !== null && 'episodes' in event;
  const parsed = claimsBatch ? EpisodeBatch.safeParse(event) : EpisodeRequest.safeParse(event);
  return parsed.success ? { success: true as const, requests: 'episodes' in parsed.data ? parsed.data.episodes : [parsed.data] } : { success: false as const, error: parsed.error };
}

export const EpisodeOutcome = z.object({
  key: z.string(),
  /** This invocation wrote the record (false when it was there already, or nothing was written). */
  written: z.boolean(),
  /** The record existed before this invocation finished: a re-delivery, answered without harm. */
  duplicate: z.boolean(),
  /** The iteration had closed (HTTP 409 from the trainer): the episode stopped and wrote nothing. */
  closed: z.boolean(),
  reward: z.number().nullable(),
  error: z.string().nullable(),
});
export type EpisodeOutcome = z.infer<typeof EpisodeOutcome>;

export const EpisodeResponse = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), outcomes: z.array(EpisodeOutcome) }),
  /** The event itself was unusable (malformed): nothing ran, nothing was written. */
  z.object({ ok: z.literal(false), error: z.string() }),
]);
export type EpisodeResponse = z.infer<typeof EpisodeResponse>;
