/**
 * Which split a suite's task is in, from its content alone, so train, eval and validation never share a
 * task whatever seed or count samples them. It is environments/task-sampler.ts's rule made three-way: bit 0
 * of the sha256 of the task's canonical JSON puts it in train (0) or held out (1), exactly as for a
 * generator's tasks; a held-out task is eval when bit 1 is 0, validation when it is 1. About half the tasks
 * train, a quarter each are eval and validation.
 */
import { createHash } from 'node:crypto';
import type { Split } from '../environment.ts';

/** The canonical JSON of a task, as its environment's schema parsed it (key order from the schema). */
export function canonicalTaskJson(task: unknown): string {
  return JSON.stringify(task);
}

export function taskHash(task: unknown): Buffer {
  return createHash('sha256').update(canonicalTaskJson(task)).digest();
}

export function suiteSplitOf(task: unknown): Split {
  const b = taskHash(task)[0];
  if ((b & 1) === 0) return 'train';
  return (b & 2) === 0 ? 'eval' : 'validation';
}

/** A suite task's id: `<suite>-<16 hex of its hash>` (an Id: a suite name is at most 47 characters). */
export function suiteTaskId(suite: string, task: unknown): string {
  return `${suite}-${taskHash(task).subarray(0, 8).toString('hex')}`;
}

export function splitCounts(tasks: readonly unknown[]): Record<Split, number> {
  const counts: Record<Split, number> = { train: 0, eval: 0, validation: 0 };
  for (const t of tasks) counts[suiteSplitOf(t)]++;
  return counts;
}
