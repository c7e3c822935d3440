/**
 * A run's or an evaluation's task suite pinned when it is created, the way model-pin.ts pins a model: the
 * name's current manifest (or the one the request gives, if the store has it) is written into the stored
 * request. A suite that is unknown, of another environment, or too small for what the request draws from
 * it is a 400 naming the field, so a run never starts only to fail at its first sample.
 */
import { pinSuiteName, UnknownSuiteError } from '../../environments/task-suites/suite-catalog.ts';
import { suiteFitIssues, type SuiteDemand } from '../../environments/task-suites/suite-fit.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { TaskSuiteRef } from '../../shared/schemas/index.ts';
import { invalidProblem } from './errors.ts';

/** `path` is where the reference sits in the request (`tasks.suite`). */
export async function pinRequestSuite(store: ObjectStore, ref: TaskSuiteRef, path: string, environment: string, demands: readonly SuiteDemand[]): Promise<{ name: string; manifest: string }> {
  let pinned;
  try {
    pinned = await pinSuiteName(store, ref);
  } catch (err) {
    if (err instanceof UnknownSuiteError) throw invalidProblem([{ path: `${path}.${err.field}`, message: err.message }]);
    throw err;
  }
  const issues = suiteFitIssues(pinned, environment, demands, path);
  if (issues.length) throw invalidProblem(issues);
  return { name: pinned.name, manifest: pinned.manifest };
}
