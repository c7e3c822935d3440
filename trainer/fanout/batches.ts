/**
 * What both fan-out adapters share: cutting requests into invocations, running invocations with a
 * concurrency limit, and reading an EpisodeResponse back into one DispatchOutcome per request.
 */
import type { DispatchOutcome } from '../../shared/ports/fanout.ts';
import type { EpisodeRequest } from '../../shared/schemas/index.ts';
import { MAX_EPISODES_PER_INVOCATION, type EpisodeEvent, type EpisodeResponse } from '../../functions/episode-event.ts';

export function toBatches(requests: EpisodeRequest[], perInvocation: number): EpisodeRequest[][] {
  if (!Number.isInteger(perInvocation) || perInvocation < 1 || perInvocation > MAX_EPISODES_PER_INVOCATION) {
    throw new Error(`episodes per invocation must be an integer in 1..${MAX_EPISODES_PER_INVOCATION} (got ${perInvocation})`);
  }
  const batches: EpisodeRequest[][] = [];
  for (let i = 0; i < requests.length; i += perInvocation) batches.push(requests.slice(i, i + perInvocation));
  return batches;
}

/** A single request travels bare (the common Lambda event); several as `{ episodes }`. */
export function toEvent(batch: EpisodeRequest[]): EpisodeEvent {
  return batch.length === 1 ? batch[0] : { episodes: batch };
}

/**
 * `ok` means the request's record is in the store (written now, or already there); `error` says why
 * not, or carries the episode's own failure when its record records one.
 */
export function outcomesFromResponse(batch: EpisodeRequest[], response: EpisodeResponse): DispatchOutcome[] {
  if (!response.ok) return failAll(batch, response.error);
  return batch.map((request, i) => {
    const o = response.outcomes[i];
    if (!o) return { request, ok: false, error: 'the function answered fewer outcomes than it was sent episodes' };
    const ok = o.written || o.duplicate;
    return { request, ok, ...(o.error !== null ? { error: o.error } : ok ? {} : { error: 'no record written' }) };
  });
}

export function failAll(batch: EpisodeRequest[], error: string, timedOut = false): DispatchOutcome[] {
  return batch.map((request) => ({ request, ok: false, error, ...(timedOut ? { timedOut } : {}) }));
}

/**
 * Runs `work` over the items, at most `limit` at a time, results in item order. Once `signal` aborts,
 * items not yet started resolve through `skipped` instead.
 */
export async function mapWithConcurrency<T, R>(
  items: T[],
  limit: number,
  work: (item: T, index: number) => Promise<R>,
  skipped: (item: T) => R,
  signal?: AbortSignal,
): Promise<R[]> {
  if (!Number.isInteger(limit) || limit < 1) throw new Error(`concurrency must be a positive integer (got ${limit})`);
  const results = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = signal?.aborted ? skipped(items[i]) : await work(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}
