import type { z } from 'zod';

/** A zod issue as it reaches users: a dotted field path and a message. */
export interface FieldIssue {
  path: string;
  message: string;
}

export function fieldIssues(error: z.ZodError): FieldIssue[] {
  return error.issues.map((i) => ({ path: i.path.length ? i.path.map(String).join('.') : '(root)', message: i.message }));
}

/** One line per issue, `path: message`, for CLI errors and logs. */
export function formatIssues(error: z.ZodError): string {
  return fieldIssues(error)
    .map((i) => `${i.path}: ${i.message}`)
    .join('; ');
}
