/**
 * A folder of task pages pushed to the store (`esopt tasks push DIR`): a MiniWoB++-layout folder, each file
 * stored once by the sha256 of its bytes, listed by a manifest that is itself stored by its sha256. Runs and
 * evaluations name a folder by name and are pinned to its manifest when they are created, like task suites.
 */
import { z } from 'zod';
import { Sha256 } from './model-store.ts';
import { TaskSuiteName } from './task-suite-ref.ts';

export const TASK_FOLDER_LIMITS = {
  /** The most files a folder may hold (MiniWoB++'s own folder is some hundreds). */
  files: 5_000,
  /** The most bytes one file may have: the task server serves nothing larger. */
  fileBytes: 8 * 1024 * 1024,
  /** The most bytes all the files may have together. */
  totalBytes: 256 * 1024 * 1024,
} as const;

/** A folder's name: the same rule as a task suite's. */
export const TaskFolderName = TaskSuiteName.describe('task folder name');

/** A path inside the folder: relative, `/`-separated, no `.` or `..` segment, no backslash or NUL. */
export const TaskFolderPath = z
  .string()
  .min(1)
  .max(512)
  .refine((p) => !p.startsWith('/') && !/[\\\0]/.test(p) && p.split('/').every((s) => s !== '' && s !== '.' && s !== '..'), 'a relative path inside the folder (no leading /, no . or .. segments, no backslashes)');

export const TaskFolderFile = z.object({ path: TaskFolderPath, sha256: Sha256, bytes: z.number().int().min(0).max(TASK_FOLDER_LIMITS.fileBytes) }).strict();
export type TaskFolderFile = z.infer<typeof TaskFolderFile>;

/** What a manifest holds: the files in path order (so equal folders are one manifest), and the MiniWoB pages among them. */
export const TaskFolderManifest = z
  .object({
    layout: z.literal('miniwob'),
    files: z.array(TaskFolderFile).min(1).max(TASK_FOLDER_LIMITS.files),
    /** The task names: `html/miniwob/<name>.html`, sorted. */
    tasks: z.array(z.string()).min(1),
  })
  .strict();
export type TaskFolderManifest = z.infer<typeof TaskFolderManifest>;

/** What a name points at now (written last by a push). */
export const NamedTaskFolder = z
  .object({
    name: TaskFolderName,
    manifestSha256: Sha256,
    files: z.number().int().min(1),
    bytes: z.number().int().min(0),
    tasks: z.number().int().min(1),
    pushedAt: z.iso.datetime(),
  })
  .strict();
export type NamedTaskFolder = z.infer<typeof NamedTaskFolder>;

/** How web options name a pushed folder; `manifest` is filled in (pinned) when a run or an evaluation is created. */
export const TaskFolderRef = z.object({ name: TaskFolderName, manifest: Sha256.optional() }).strict();
export type TaskFolderRef = z.infer<typeof TaskFolderRef>;
