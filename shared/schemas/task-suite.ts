/**
 * Task suites as data (layout in shared/keys.ts): a pushed JSONL file of one environment's tasks, stored once
 * under the sha256 of its canonical bytes (shared/task-suite-catalog.ts), with a name pointing at it. The
 * manifest sha256 is what a run or an evaluation pins, so re-pushing a name never changes a run's tasks.
 */
import { z } from 'zod';
import { EnvironmentName } from './run-config.ts';
import { Sha256 } from './model-store.ts';

/** The bounds a push checks (documented in docs/ENVIRONMENTS.md, "Task suites"). */
export const TASK_SUITE_LIMITS = {
  /** The whole JSONL file. */
  fileBytes: 16 * 1024 * 1024,
  /** One line: one task. */
  lineBytes: 64 * 1024,
  tasks: 100_000,
} as const;

/**
 * A suite's name: an id short enough that `<name>-<16 hex>` (a task's id) is still an id (≤ 64 characters).
 */
export const TaskSuiteName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,46}$/, 'must be 1-47 characters of letters, digits, "_" or "-", starting with a letter or digit (task ids append 17)')
  .describe('task suite name');
export type TaskSuiteName = z.infer<typeof TaskSuiteName>;

/** How a run or an evaluation names a suite; `manifest` is filled in (pinned) when it is created. */
export const TaskSuiteRef = z.object({ name: TaskSuiteName, manifest: Sha256.optional() }).strict();
export type TaskSuiteRef = z.infer<typeof TaskSuiteRef>;

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
