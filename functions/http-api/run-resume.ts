/**
 * A run that ended — or one still `requested`, `running` or `stopping` that its launcher finds abandoned (a
 * trainer box died with its queue entry gone: nothing queued, no claimant that may be alive) — made ready to
 * go on (POST /runs/{id}/resume): its config extended and written back,
 * and what its last start left that would end it again at once cleared — the stop request, which the
 * launchers honour before a single iteration, and the trainer box's claim, which keeps a run from being
 * claimed twice — then its status `requested` again. The launcher it is handed to then resumes it from
 * its checkpoint and log, exactly as a restarted trainer does.
 */
import { keys } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { extendRunConfig, type RunExtension } from '../../shared/run-extension.ts';
import type { RunLauncher } from '../../shared/ports/launchers.ts';
import { RunStatus, WorkClaim, type RunConfig } from '../../shared/schemas/index.ts';
import { cappedBudget, type CostCaps } from './cost-caps.ts';
import { ApiProblem, invalidProblem } from './errors.ts';
import { readCommittedUpdates, readConfig, readStatus } from './run-reader.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';

const ACTIVE = new Set<RunStatus['state']>(['requested', 'running', 'stopping']);

export interface ReadiedRun {
  config: RunConfig;
  status: RunStatus;
  completed: number;
  changes: string[];
}

/** With `caps` (a deployed stack), the extended run must keep a cost limit within the stack's cap, as a new run must. */
export async function readyResume(store: ObjectStore, run: string, extension: RunExtension, caps?: CostCaps, launcher?: Pick<RunLauncher, 'abandoned'>): Promise<ReadiedRun> {
  const config = await readConfig(store, run);
  const status = await readStatus(store, run);
  // An active run is resumed only when its launcher finds it abandoned (nothing queued, no live claimant).
  let abandonedClaim: WorkClaim | null = null;
  if (status && ACTIVE.has(status.state)) {
    const verdict = launcher?.abandoned ? await launcher.abandoned(run, status) : null;
    if (!verdict?.abandoned) throw new ApiProblem(409, 'run_active', `run ${run} is ${status.state}: ${verdict ? `${verdict.reason}` : 'stop it first, or wait until it ends'}`);
    abandonedClaim = verdict.claim;
  }
  const completed = await readCommittedUpdates(store, run);
  const extended = extendRunConfig(config, extension, completed);
  if (!extended.ok) throw invalidProblem(extended.issues);
  if (caps) {
    const budget = cappedBudget(extended.config.budget, caps.runMaxCostUsd, 'run');
    if (!budget.ok) throw invalidProblem(budget.issues);
    if (budget.budget !== extended.config.budget) {
      extended.changes.push(`budget.maxCostUsd ${extended.config.budget.maxCostUsd ?? 'none'} → ${budget.budget.maxCostUsd} (the stack's cap)`);
      extended.config = { ...extended.config, budget: budget.budget };
    }
  }
  if (completed >= extended.config.iterations && status?.state === 'finished') {
    throw invalidProblem([{ path: 'iterations', message: `run ${run} has finished all its ${completed} iterations: give more to extend it` }]);
  }
  if (extended.changes.length) await writeJson(store, keys.config(run), extended.config);
  await store.delete(keys.stopRequest(run));
  if (abandonedClaim === null || (await readJson(store, keys.workClaim('run', run), WorkClaim))?.claimId === abandonedClaim.claimId) await store.delete(keys.workClaim('run', run));
  else throw new ApiProblem(409, 'run_active', `run ${run} was claimed again while it was being resumed: it is under way`);
  const now = new Date().toISOString();
  const next = RunStatus.parse({ run, requestedAt: now, startedAt: null, ...status, state: 'requested', finishedAt: null, error: null, stopReason: null, updatedAt: now });
  await writeJson(store, keys.runStatus(run), next);
  return { config: extended.config, status: next, completed, changes: extended.changes };
}
