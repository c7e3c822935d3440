/**
 * Launchers for a deployment where nothing may run after the response (Lambda): the API has written the
 * run's config or the evaluation's request already, and starting it means leaving a QueuedWork entry at
 * `keys.queuedWork(kind, id)` for the trainer box, whose poller (trainer/cloud/box/trainer-box.ts) claims
 * and runs it (a model export too, on its own lane there). A run stays `requested` and an evaluation `queued` until then. A stop needs nothing
 * more: stop.json, which the route wrote, is the request the box watches for. A run under way whose entry is
 * gone (its box died after the entry went, or the entry was lost) is `abandoned` once no claimant that may be
 * alive holds it (shared/stale-claim.ts): a resume then queues it afresh.
 *
 * `afterQueue` runs after each entry is written: on the stack it starts the trainer box (box-wake.ts).
 *
 * An endpoint key never goes to the store: it goes to the secret store, bound to the endpoint's origin
 * (shared/secrets/evaluation-key.ts), and the queue entry names where it is.
 */
import { randomBytes } from 'node:crypto';
import { keys } from '../../shared/keys.ts';
import type { ModelExports } from '../../shared/ports/model-exports.ts';
import type { EvaluationLauncher, RunLauncher } from '../../shared/ports/launchers.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { SecretStore } from '../../shared/ports/secret-store.ts';
import { storeEvaluationKey } from '../../shared/secrets/evaluation-key.ts';
import { claimantGone, claimRunningHere, lastSignOfLife, STALE_CLAIM_MS } from '../../shared/stale-claim.ts';
import { StoredEvaluationRequest, WorkClaim, type EvaluationKeyRef, type QueuedWork, type WorkKind } from '../../shared/schemas/index.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';

/** Where queued evaluations' keys go: the secret store and the path under which each gets `<path>/<evaluation id>`. */
export interface EvaluationKeyStore {
  secrets: SecretStore;
  path: string;
}

export function storeQueueLaunchers(
  store: ObjectStore,
  keyStore: EvaluationKeyStore,
  afterQueue: () => Promise<void> = async () => {},
): { runs: RunLauncher; evaluations: EvaluationLauncher; exports: ModelExports } {
  /** Create-only: the same work queued twice is one entry. */
  async function enqueue(store: ObjectStore, kind: WorkKind, id: string, extra: Pick<QueuedWork, 'apiKey' | 'export'> = {}): Promise<void> {
    const work: QueuedWork = { kind, id, queuedAt: new Date().toISOString(), ...extra };
    await writeJson(store, keys.queuedWork(kind, id), work, true);
    await afterQueue();
  }
  return {
    // Each request gets its own entry (and so its own claim): a failed export asked for again runs again.
    exports: { start: (request) => enqueue(store, 'export', `export-${randomBytes(12).toString('hex')}`, { export: request }) },
    runs: {
      start: (run) => enqueue(store, 'run', run),
      async stop() {},
      // An entry in the queue is the box's to carry on (its poll takes a dead claimant's work over); without
      // one, the run is abandoned unless a claimant holds it that may be alive (the one stale-claim rule).
      async abandoned(run, status) {
        if ((await store.get(keys.queuedWork('run', run))) !== null) {
          return { abandoned: false, reason: `it is queued for the trainer box, which runs it (or takes it over from a box that died) at its next poll` };
        }
        const claim = await readJson(store, keys.workClaim('run', run), WorkClaim);
        if (!claim || claimantGone(claim, { statusUpdatedAt: status.updatedAt, runningHere: claimRunningHere(claim.claimId) })) return { abandoned: true, claim };
        const seen = new Date(lastSignOfLife(claim, status.updatedAt));
        const after = new Date(seen.getTime() + STALE_CLAIM_MS).toISOString();
        return { abandoned: false, reason: `${claim.claimedBy} claimed it and was last seen at ${seen.toISOString()}: it may still be running it (its box is taken for gone after ${STALE_CLAIM_MS / 60_000} minutes of silence, at ${after}; resume it then)` };
      },
    },
    evaluations: {
      async start(id, secrets) {
        if (!secrets.apiKey) return enqueue(store, 'evaluation', id);
        const request = await readJson(store, keys.evaluationRequest(id), StoredEvaluationRequest);
        if (request?.model.kind !== 'external') throw new Error(`evaluation ${id} has a key but no external model in the store`);
        const ref = await storeEvaluationKey(keyStore.secrets, keyStore.path, id, secrets.apiKey, request.model.baseUrl);
        try {
          await enqueue(store, 'evaluation', id, { apiKey: ref });
        } catch (err) {
          // Nobody will run it, so nobody else would delete the key.
          await keyStore.secrets.delete(ref.parameter).catch(() => {});
          throw err;
        }
      },
    },
  };
}
