/** The messages between the local pool and its worker processes. */
import { z } from 'zod';
import { EpisodeResponse } from '../../functions/episode-event.ts';

export const WorkerMessage = z.object({ id: z.number().int(), event: z.unknown() });
export type WorkerMessage = z.infer<typeof WorkerMessage>;

export const WorkerReply = z.union([
  z.object({ id: z.number().int(), response: EpisodeResponse }),
  /** The handler threw (it should not: it answers errors); the stack travels back for the outcome. */
  z.object({ id: z.number().int(), crash: z.string() }),
]);
export type WorkerReply = z.infer<typeof WorkerReply>;

export const WorkerReady = z.object({ ready: z.literal(true) });
