/**
 * Disjoint train and eval splits for any task generator. A task belongs to a split by a bit of the
 * hash of its content, so no task can ever be in both splits, whatever seeds the two samplers use: a
 * candidate drawn for the train split whose hash says "eval" is thrown away and redrawn. The task id is
 * the hash too, so the same task always has the same id (and a store key that collides on purpose).
 */
import { createHash } from 'node:crypto';
import type { SampledTask, Split } from './environment.ts';
import { SeededRandom, deriveSeed } from './random.ts';

/** How many candidates may be drawn per task before the generator is judged too small a space. */
const MAX_ATTEMPTS_PER_TASK = 64;

export interface TaskGenerator<Task> {
  /** Prefix of every task id, e.g. "sudoku-9x9" (letters, digits, "-"; short: the id stays ≤ 64 chars). */
  idPrefix: string;
  generate(random: SeededRandom): Task;
}

function contentHash(task: unknown): Buffer {
  return createHash('sha256').update(JSON.stringify(task)).digest();
}

/** The split a task belongs to, from its content alone. */
export function splitOf(task: unknown): Split {
  return (contentHash(task)[0] & 1) === 0 ? 'train' : 'eval';
}

/** The id a task gets (its prefix plus 16 hex digits of its content hash). */
export function taskId(idPrefix: string, task: unknown): string {
  return `${idPrefix}-${contentHash(task).subarray(0, 8).toString('hex')}`;
}

/** n distinct tasks of one split, deterministic in (split, n, seed). */
export function sampleSplit<Task>(generator: TaskGenerator<Task>, split: Split, n: number, seed: number): SampledTask<Task>[] {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`n must be a non-negative integer, got ${n}`);
  const out: SampledTask<Task>[] = [];
  const seen = new Set<string>();
  let attempt = 0;
  while (out.length < n) {
    if (attempt > MAX_ATTEMPTS_PER_TASK * (n + 1)) {
      throw new Error(`could only find ${out.length} distinct ${split} tasks of "${generator.idPrefix}" (asked for ${n}); the task space is too small`);
    }
    // The candidate's randomness depends on the split, so train and eval draw different sequences.
    const task = generator.generate(new SeededRandom(deriveSeed(seed, attempt++, split === 'train' ? 0 : 1)));
    if (splitOf(task) !== split) continue;
    const id = taskId(generator.idPrefix, task);
    if (seen.has(id)) continue;
    seen.add(id);
    out.push({ id, task });
  }
  return out;
}
