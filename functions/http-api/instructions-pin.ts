/**
 * A run's or an evaluation's instructions (c_t) pinned when it is created, as model-pin.ts pins a model:
 * the name's current manifest (or the one the request gives, if the store has it) goes into the stored
 * request, so a later push under the name never changes what its episodes run under. Unknown: 400 at the field.
 */
import { pinInstructionsName, UnknownInstructionsError } from '../../shared/instructions-catalog.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { InstructionsRef, PinnedInstructions } from '../../shared/schemas/index.ts';
import { invalidProblem } from './errors.ts';

export async function pinRequestInstructions(store: ObjectStore, ref: InstructionsRef): Promise<PinnedInstructions> {
  try {
    return await pinInstructionsName(store, ref);
  } catch (err) {
    if (err instanceof UnknownInstructionsError) throw invalidProblem([{ path: `instructions.${err.field}`, message: err.message }]);
    throw err;
  }
}
