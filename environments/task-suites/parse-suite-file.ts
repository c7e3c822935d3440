/**
 * A task suite's JSONL file, read into tasks: one task a line, each valid for its environment's taskSchema,
 * each once (by the sha256 of its canonical JSON). Every error names the line, and for a bad task every
 * failing field path, so a suite of thousands of lines is fixed in one pass. Bounds: TASK_SUITE_LIMITS.
 */
import { z } from 'zod';
import { TASK_SUITE_LIMITS } from '../../shared/schemas/index.ts';
import { canonicalTaskJson, taskHash } from './suite-splits.ts';

export class TaskSuiteFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TaskSuiteFileError';
  }
}

/** At most this many line errors are listed; the count of the rest follows. */
const MAX_LISTED_ERRORS = 20;

export function parseSuiteJsonl<Task>(text: string, taskSchema: z.ZodType<Task>, environment: string): Task[] {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > TASK_SUITE_LIMITS.fileBytes) throw new TaskSuiteFileError(`the file is ${bytes} bytes; a task suite holds at most ${TASK_SUITE_LIMITS.fileBytes} bytes`);
  // One trailing newline ends the last line; it does not start an empty one.
  const lines = text.replace(/\r?\n$/, '').split(/\r?\n/);
  if (text.trim() === '') throw new TaskSuiteFileError('the file is empty: a task suite is one JSON task a line');
  if (lines.length > TASK_SUITE_LIMITS.tasks) throw new TaskSuiteFileError(`the file has ${lines.length} lines; a task suite holds at most ${TASK_SUITE_LIMITS.tasks} tasks`);
  const errors: string[] = [];
  const tasks: Task[] = [];
  const lineOf = new Map<string, number>();
  lines.forEach((line, i) => {
    const n = i + 1;
    const at = `line ${n}`;
    if (Buffer.byteLength(line, 'utf8') > TASK_SUITE_LIMITS.lineBytes) return void errors.push(`${at}: ${Buffer.byteLength(line, 'utf8')} bytes; a task is at most ${TASK_SUITE_LIMITS.lineBytes} bytes`);
    if (line.trim() === '') return void errors.push(`${at}: blank; every line is one JSON task`);
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      return void errors.push(`${at}: not JSON (${(err as Error).message})`);
    }
    const r = taskSchema.safeParse(value);
    if (!r.success) {
      const issues = r.error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : '(the task)'}: ${issue.message}`);
      return void errors.push(`${at}: not a ${environment} task: ${issues.join('; ')}`);
    }
    const hash = taskHash(r.data).toString('hex');
    const first = lineOf.get(hash);
    if (first !== undefined) return void errors.push(`${at}: the same task as line ${first} (${canonicalTaskJson(r.data).slice(0, 80)})`);
    lineOf.set(hash, n);
    tasks.push(r.data);
  });
  if (errors.length) {
    const more = errors.length > MAX_LISTED_ERRORS ? [`… and ${errors.length - MAX_LISTED_ERRORS} more`] : [];
    throw new TaskSuiteFileError(`${errors.length} bad line(s):\n${[...errors.slice(0, MAX_LISTED_ERRORS), ...more].join('\n')}`);
  }
  return tasks;
}
