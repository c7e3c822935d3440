/**
 * What the stateless HTTP API hands work to. The API writes the request into the store first (a run's
 * config and status, an evaluation's request), so a launcher only needs the id: the local adapters start
 * the work in this process; a cloud deployment leaves it to a trainer box that polls the store.
 */
export interface RunLauncher {
  /** Starts the run whose config.json and status.json are in the store; resolves once it is started, not finished. */
  start(run: string): Promise<void>;
  /** The stop request is in the store already; an in-process launcher may also react at once. */
  stop(run: string): Promise<void>;
}

import type { EvaluationKeyRef } from '../schemas/evaluation-key.ts';

/** Secrets an evaluation needs that must never be written to the object store. */
export interface EvaluationSecrets {
  /** The endpoint's key itself: the local API, which runs the evaluation in its own process. */
  apiKey?: string;
  /** Where a queued evaluation's key waits in the secret store: what the trainer box is handed. */
  apiKeyRef?: EvaluationKeyRef;
}

export interface EvaluationLauncher {
  /** Starts the evaluation whose request.json is in the store; resolves once it is started, not finished. */
  start(id: string, secrets: EvaluationSecrets): Promise<void>;
}
