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
  /**
   * For a run whose status says it is under way (`requested`, `running`, `stopping`): whether nothing will carry
   * it on — no work queued for it and no claimant that may be alive — so that a resume may start it again.
   * Absent: the launcher cannot tell, and such a run is never resumed.
   */
  abandoned?(run: string, status: RunStatus): Promise<RunAbandonment>;
}

/** Whether an active run is abandoned; if so, the claim it was left under (null: none), for the resume to release. */
export type RunAbandonment = { abandoned: true; claim: WorkClaim | null } | { abandoned: false; reason: string };

import type { EvaluationKeyRef } from '../schemas/evaluation-key.ts';
import type { RunStatus, WorkClaim } from '../schemas/index.ts';

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
