/**
 * Launchers for a deployment where nothing may run after the response (Lambda): the API has written the
 * run's config or the evaluation's request already, and starting it means leaving a QueuedWork entry at
 * `keys.queuedWork(kind, id)` for the trainer box, whose poller (trainer/hosting/bucket-requests.ts) claims
 * and runs it. A run stays `requested` and an evaluation `queued` until then. A stop needs nothing
 * more: stop.json, which the route wrote, is the request the box watches for.
 */
import { keys } from '../../shared/keys.ts';
import type { EvaluationLauncher, RunLauncher } from '../../shared/ports/launchers.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { QueuedWork, WorkKind } from '../../shared/schemas/index.ts';
import { ApiProblem } from './errors.ts';
import { writeJson } from './store-json.ts';

/** Create-only: the same work queued twice is one entry. */
async function enqueue(store: ObjectStore, kind: WorkKind, id: string): Promise<void> {
  const work: QueuedWork = { kind, id, queuedAt: new Date().toISOString() };
  await writeJson(store, keys.queuedWork(kind, id), work, true);
}

export function storeQueueLaunchers(store: ObjectStore): { runs: RunLauncher; evaluations: EvaluationLauncher } {
  return {
    runs: {
      start: (run) => enqueue(store, 'run', run),
      async stop() {},
    },
    evaluations: {
      async start(id, secrets) {
        // A queued request lives in the store, and an endpoint's key must never be written there.
        if (secrets.apiKey) throw new ApiProblem(422, 'key_not_queueable', 'this deployment queues evaluations in the store, where an endpoint key may not go: evaluate keyed endpoints with the local API (esopt api)');
        await enqueue(store, 'evaluation', id);
      },
    },
  };
}
