import type { EpisodeRequest, RewardRecord } from '../schemas/index.ts';

export interface DispatchOptions {
  concurrency: number;
  /** Per-episode time limit in milliseconds. */
  timeoutMs: number;
  signal?: AbortSignal;
  /**
   * Aborted by the caller once it has read every request's record from the store. An adapter that is
   * only waiting for records to appear (Lambda's Event invokes, trainer/fanout/record-awaiting.ts) may
   * settle at once; one still running episodes lets them finish, unlike `signal`.
   */
  recordsIn?: AbortSignal;
}

/**
 * What came back from dispatching one request. Rewards travel through the object store, not through
 * this result: `record` is only set by adapters that run synchronously, as a convenience for callers.
 */
export interface DispatchOutcome {
  request: EpisodeRequest;
  ok: boolean;
  error?: string;
  /**
   * Set when the episode ran out of time rather than failed: its per-episode limit passed (the worker
   * killed, no record within the limit), or the dispatch was cancelled (the iteration closed) first.
   */
  timedOut?: boolean;
  record?: RewardRecord;
}

/** Fans episode requests out to workers (a local pool, or Lambda). */
export interface Fanout {
  dispatch(requests: EpisodeRequest[], options: DispatchOptions): Promise<DispatchOutcome[]>;
  close(): Promise<void>;
}
