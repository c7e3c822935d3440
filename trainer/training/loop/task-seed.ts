/** The task seed of an iteration's training sample: fresh tasks every iteration, the same ones on replay. */
import { philox4x32 } from '../../../shared/philox.ts';

const SALT = 0x3e9150de;

export function iterationTaskSeed(taskSeed: number, iteration: number): number {
  const out = new Uint32Array(4);
  philox4x32(iteration >>> 0, 0, 0, 1, taskSeed >>> 0, SALT, out);
  return out[0];
}
