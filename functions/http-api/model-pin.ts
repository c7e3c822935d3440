/**
 * A run's or an evaluation's named model pinned when it is created: the name's current manifest (or the
 * manifest the request gives, if the store has it) is written into the stored request, so the box opens
 * exactly that one however often the name is re-pushed. An unknown name is a 400 naming the field.
 */
import { pinModelName, UnknownModelError } from '../../shared/model-catalog.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { ModelSpec } from '../../shared/schemas/index.ts';
import { invalidProblem } from './errors.ts';

/** `path` is where the spec sits in the request: `model` for a run, `model.model` for a base evaluation. */
export async function pinRequestModel(store: ObjectStore, spec: ModelSpec, path: string): Promise<ModelSpec> {
  if (!('name' in spec)) return spec;
  try {
    return await pinModelName(store, spec);
  } catch (err) {
    if (err instanceof UnknownModelError) throw invalidProblem([{ path: `${path}.${err.field}`, message: err.message }]);
    throw err;
  }
}
