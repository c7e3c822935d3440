/**
 * An evaluation episode as a person replays it (`GET /evaluations/{id}/episodes/{index}`): step by step, the
 * screenshot, what the agent was shown, the error its previous action met, and what it did next. Built from
 * the stored transcript and reward record (functions/http-api/episode-replay.ts); the frames themselves are
 * served by the route each step names.
 */
import { z } from 'zod';
import { Id, TaskId } from './ids.ts';

/** What an episode's trace kept of the screenshots it was handed (functions/episode-frames.ts keeps them). */
export const FramesNote = z
  .object({
    kept: z.number().int().min(0),
    /** Frames handed over but not kept: too large, past a bound, not a PNG, or a write that failed. */
    omitted: z.number().int().min(0),
    /** One sentence per reason, e.g. "2 frame(s) over 1048576 bytes"; empty when none were left out. */
    reasons: z.array(z.string()),
  })
  .meta({ id: 'FramesNote' });
export type FramesNote = z.infer<typeof FramesNote>;

export const ReplayStep = z
  .object({
    /** 0: the state after reset; k: after the k-th action. */
    step: z.number().int().min(0),
    /** What the agent was shown (cut to the transcript's bound, which says so in the text). */
    observation: z.string(),
    done: z.boolean(),
    /** The reward the environment reported with this state, where it reported one. */
    reward: z.number().nullable(),
    /** Why the environment refused the action that led here (its `info.error`), or null. */
    error: z.string().nullable(),
    /** What the agent did on seeing this state; null after the last action (or where the episode stopped). */
    action: z.object({ text: z.string(), toolCalls: z.array(z.object({ name: z.string(), arguments: z.unknown() })).optional() }).nullable(),
    /** The API path of this state's screenshot (PNG, bearer-protected like every route), or null when none was kept. */
    frame: z.string().nullable(),
  })
  .meta({ id: 'ReplayStep' });
export type ReplayStep = z.infer<typeof ReplayStep>;

export const EpisodeReplay = z
  .object({
    evaluation: Id,
    index: z.number().int().min(0),
    task: TaskId,
    round: z.number().int().min(0),
    reward: z.number(),
    success: z.boolean(),
    /** Why the episode itself failed (the policy, a deadline, the environment), or null. */
    error: z.string().nullable(),
    /** The system message the agent was given, or null when the transcript holds none. */
    system: z.string().nullable(),
    steps: z.array(ReplayStep),
    /** Null for a whole transcript; otherwise the stored transcript's note on what was cut. */
    truncated: z.string().nullable(),
    /** Null when the environment drew no screenshots. */
    frames: FramesNote.nullable(),
    /** The stored transcript's own route, for the raw entries (tokens, timings). */
    transcript: z.string(),
  })
  .meta({ id: 'EpisodeReplay' });
export type EpisodeReplay = z.infer<typeof EpisodeReplay>;
