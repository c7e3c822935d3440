import type { EpisodeRequest, RewardRecord } from '../schemas/index.ts';

export interface DispatchOptions {
  concurrency: number;
  /** Per-episode time limit in milliseconds. */
  timeoutMs: number;
  signal?: AbortSignal;
}

/**
 * What came back from dispatching one request. Rewards travel through the object store, not through
 * this result: `record` is only set by adapters that run synchronously, as a convenience for callers.
 */
export interface DispatchOutcome {
  request: EpisodeRequest;
  ok: boolean;
  error?: string;
  record?: RewardRecord;
}

/** Fans episode requests out to workers (a local pool, or Lambda). */
export interface Fanout {
  dispatch(requests: EpisodeRequest[], options: DispatchOptions): Promise<DispatchOutcome[]>;
  close(): Promise<void>;
}
