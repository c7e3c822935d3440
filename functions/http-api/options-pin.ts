/**
 * What a request's environment options name in the store, pinned when the run or the evaluation is created
 * (EnvironmentDefinition.pinOptions: a pushed task folder's manifest and task names), like suite-pin.ts pins a
 * suite. A name the store does not hold is a 400 at its field under `environment.options`.
 */
import { OptionsIssue, type EnvironmentDefinition } from '../../environments/environment.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { invalidProblem } from './errors.ts';

/** The options to store: the request's own when there is nothing to pin, else the pinned ones. */
export async function pinRequestOptions(definition: EnvironmentDefinition, options: unknown, store: Pick<ObjectStore, 'get'>): Promise<unknown> {
  if (!definition.pinOptions) return options;
  const parsed = definition.optionsSchema.parse(options ?? {});
  let pinned: unknown;
  try {
    pinned = await definition.pinOptions(parsed, store);
  } catch (err) {
    if (err instanceof OptionsIssue) throw invalidProblem([{ path: `environment.options.${err.path}`, message: err.message }]);
    throw err;
  }
  return pinned === parsed ? options : pinned;
}
