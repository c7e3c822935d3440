/** The seed of one episode: a Philox mix of (run seed, iteration, member, task index), so a replay gets the same one. */
import { philox4x32 } from '../../shared/philox.ts';
import type { MemberRef } from '../../shared/schemas/index.ts';

const SALT = 0x3e9150de;
const BASE_WORD = 0xffffffff;

export function episodeSeed(runSeed: number, iteration: number, member: MemberRef, taskIndex: number): number {
  const out = new Uint32Array(4);
  philox4x32(iteration >>> 0, member === 'base' ? BASE_WORD : member >>> 0, taskIndex >>> 0, 0, runSeed >>> 0, SALT, out);
  return out[0];
}

/** The task seed of an iteration's training sample: fresh tasks every iteration, the same ones on replay. */
export function iterationTaskSeed(taskSeed: number, iteration: number): number {
  const out = new Uint32Array(4);
  philox4x32(iteration >>> 0, 0, 0, 1, taskSeed >>> 0, SALT, out);
  return out[0];
}
