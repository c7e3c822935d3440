/**
 * How a run or an evaluation names a pushed task suite (shared/schemas/task-suite.ts holds the suite itself).
 * Apart from it because the run config names a suite while the suite names its environment: one file each
 * way keeps the schema modules free of an import cycle.
 */
import { z } from 'zod';
import { Sha256 } from './model-store.ts';

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

/** A request may write the name alone (`"suite": "my-suite"`); it is read as `{ name }`, and stored pinned. */
export const TaskSuiteChoice = z.union([TaskSuiteName.transform((name): TaskSuiteRef => ({ name })), TaskSuiteRef]);
export type TaskSuiteChoice = z.infer<typeof TaskSuiteChoice>;
