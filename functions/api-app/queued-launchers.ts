/**
 * Launchers for a deployment where nothing may run after the response (Lambda): the request the API
 * already wrote to the store *is* the queue — a run stays `requested`, an evaluation `queued` — until a
 * trainer box that polls the store picks it up (see docs/API.md, "On Lambda"; that poller is not built yet).
 */
import type { EvaluationLauncher, RunLauncher } from '../../shared/ports/launchers.ts';
import { ApiProblem } from './errors.ts';

export const queuedRuns: RunLauncher = {
  async start() {},
  async stop() {},
};

export const queuedEvaluations: EvaluationLauncher = {
  async start(_id, secrets) {
    // A queued request lives in the store, and an endpoint's key must never be written there.
    if (secrets.apiKey) throw new ApiProblem(422, 'key_not_queueable', 'this deployment queues evaluations in the store, where an endpoint key may not go: evaluate keyed endpoints with the local API (esopt api)');
  },
};
