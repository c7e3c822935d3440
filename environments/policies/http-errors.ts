/** Errors of the HTTP policy client, as classes so callers can tell them apart with `instanceof`. */

/**
 * HTTP 409 from the inference server: the iteration this member belongs to has closed (its rewards are
 * no longer wanted). Not a failure of the episode: the runner stops it cleanly and records why.
 */
export class IterationClosedError extends Error {
  constructor(readonly body: string) {
    super(`the inference server closed this iteration (HTTP 409)${body ? `: ${body}` : ''}`);
    this.name = 'IterationClosedError';
  }
}

/** A request that failed for good: a non-retryable status, or retries used up. */
export class PolicyHttpError extends Error {
  constructor(
    message: string,
    /** The last HTTP status, or null when the last attempt never got a response. */
    readonly status: number | null,
    readonly attempts: number,
  ) {
    super(message);
    this.name = 'PolicyHttpError';
  }
}
