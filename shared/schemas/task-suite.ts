/**
 * Task suites as data (layout in shared/keys.ts): a pushed JSONL file of one environment's tasks, stored once
 * under the sha256 of its canonical bytes (shared/task-suite-catalog.ts), with a name pointing at it. The
 * manifest sha256 is what a run or an evaluation pins, so re-pushing a name never changes a run's tasks.
 */
import { z } from 'zod';
import { EnvironmentName } from './run-config.ts';
import { Sha256 } from './model-store.ts';
import { TaskSuiteName } from './task-suite-ref.ts';

/** The bounds a push checks (documented in docs/ENVIRONMENTS.md, "Task suites"). */
export const TASK_SUITE_LIMITS = {
  /** The whole JSONL file. */
  fileBytes: 16 * 1024 * 1024,
  /** One line: one task. */
  lineBytes: 64 * 1024,
  tasks: 100_000,
} as const;

/** The stored suite: its environment and its tasks, each already valid for that environment, each once. */
export const TaskSuite = z
  .object({
    environment: EnvironmentName,
    tasks: z.array(z.unknown()).min(1).max(TASK_SUITE_LIMITS.tasks),
  })
  .strict();
export type TaskSuite = z.infer<typeof TaskSuite>;

/** `suites/names/{name}.json`: the manifest a name points at now, with how many tasks each split holds. */
export const NamedTaskSuite = z
  .object({
    name: TaskSuiteName,
    environment: EnvironmentName,
    manifestSha256: Sha256,
    tasks: z.number().int().min(1).max(TASK_SUITE_LIMITS.tasks),
    splits: z.object({ train: z.number().int().min(0), eval: z.number().int().min(0), validation: z.number().int().min(0) }).strict(),
    pushedAt: z.iso.datetime(),
  })
  .strict();
export type NamedTaskSuite = z.infer<typeof NamedTaskSuite>;
