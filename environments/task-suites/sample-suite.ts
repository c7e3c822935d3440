/**
 * Tasks drawn from a pushed suite: the split's tasks (suite-splits.ts) in file order, shuffled by a seeded
 * Fisher–Yates and the first `count` taken — deterministic in (suite manifest, split, count, seed), without
 * replacement, and a prefix of any larger sample at the same seed. A split with fewer tasks than asked is
 * refused with how many it has (it never cycles here: an evaluation that wants more episodes than tasks
 * asks for `episodes`, which cycles the sampled tasks as it does for generated ones).
 */
import type { SampledTask, Split } from '../environment.ts';
import { SeededRandom, deriveSeed } from '../random.ts';
import { suiteSplitOf, suiteTaskId } from './suite-splits.ts';

const DRAW_DOMAIN: Record<Split, number> = { train: 0, eval: 1, validation: 2 };

export class SuiteTooSmallError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SuiteTooSmallError';
  }
}

export function sampleSuite<Task>(suite: { name: string; tasks: readonly Task[] }, split: Split, count: number, seed: number): SampledTask<Task>[] {
  if (!Number.isInteger(count) || count < 0) throw new RangeError(`count must be a non-negative integer, got ${count}`);
  const inSplit = suite.tasks.filter((t) => suiteSplitOf(t) === split);
  if (count > inSplit.length) throw new SuiteTooSmallError(`task suite ${suite.name} has ${inSplit.length} ${split} task(s) of its ${suite.tasks.length}; asked for ${count} (a task's split is fixed by its content hash: push more tasks, or ask for fewer)`);
  new SeededRandom(deriveSeed(seed, DRAW_DOMAIN[split], 0x5417e)).shuffle(inSplit);
  return inSplit.slice(0, count).map((task) => ({ id: suiteTaskId(suite.name, task), task }));
}
