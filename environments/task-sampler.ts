/**
 * Disjoint train and eval splits for any task generator. A task belongs to a split by a bit of the
 * hash of its content, so no task can ever be in both splits, whatever seeds the two samplers use: a
 * candidate drawn for the train split whose hash says "eval" is thrown away and redrawn. The task id is
 * the hash too, so the same task always has the same id (and a store key that collides on purpose).
 *
 * Validation tasks come from the eval half of the hash in a draw sequence of their own, so adding them moved
 * no train or eval task of any earlier run. Being the same half, a validation and an eval sample could in
 * principle share a task: heldOutTasks checks and refuses, rather than quietly reporting on a task twice.
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

/** The half of the hash a task belongs to, from its content alone (validation tasks are in the eval half). */
export function splitOf(task: unknown): 'train' | 'eval' {
  return (contentHash(task)[0] & 1) === 0 ? 'train' : 'eval';
}

/** The id a task gets (its prefix plus 16 hex digits of its content hash). */
export function taskId(idPrefix: string, task: unknown): string {
  return `${idPrefix}-${contentHash(task).subarray(0, 8).toString('hex')}`;
}

const DRAW_DOMAIN: Record<Split, number> = { train: 0, eval: 1, validation: 2 };

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
    // The candidate's randomness depends on the split, so each split draws its own sequence.
    const task = generator.generate(new SeededRandom(deriveSeed(seed, attempt++, DRAW_DOMAIN[split])));
    if (splitOf(task) !== (split === 'train' ? 'train' : 'eval')) continue;
    const id = taskId(generator.idPrefix, task);
    if (seen.has(id)) continue;
    seen.add(id);
    out.push({ id, task });
  }
  return out;
}

/**
 * The held-out tasks a run evaluates on: the eval split, or the validation split after checking that none of
 * its tasks is among the eval split's first n at the same seed (the tasks a run with the same settings reports on).
 */
export function heldOutTasks<Task, Options>(
  definition: { sampleTasks(split: Split, n: number, seed: number, options: Options): SampledTask<Task>[]; readonly name: string },
  split: 'eval' | 'validation',
  n: number,
  seed: number,
  options: Options,
): SampledTask<Task>[] {
  const tasks = definition.sampleTasks(split, n, seed, options);
  if (split === 'validation') {
    const evalIds = new Set(definition.sampleTasks('eval', n, seed, options).map((t) => t.id));
    const shared = tasks.filter((t) => evalIds.has(t.id)).map((t) => t.id);
    if (shared.length) throw new Error(`${definition.name}: ${shared.length} validation task(s) are also eval tasks at seed ${seed} (${shared.slice(0, 3).join(', ')}); the task space is too small to keep them apart — use another tasks.seed`);
  }
  return tasks;
}
