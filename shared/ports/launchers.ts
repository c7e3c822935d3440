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

/** Secrets an evaluation needs that must never be written to the store. */
export interface EvaluationSecrets {
  apiKey?: string;
}

export interface EvaluationLauncher {
  /** Starts the evaluation whose request.json is in the store; resolves once it is started, not finished. */
  start(id: string, secrets: EvaluationSecrets): Promise<void>;
}
