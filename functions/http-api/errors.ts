/** The one error body of the API, `{ error: { code, message, issues? } }`, and the responses built from it. */
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { z } from 'zod';
import type { ApiError } from '../../shared/schemas/index.ts';
import { fieldIssues, type FieldIssue } from '../../shared/validation.ts';

export function errorBody(code: string, message: string, issues?: FieldIssue[]): ApiError {
  return { error: { code, message, ...(issues ? { issues } : {}) } };
}

export function fail(c: Context, status: ContentfulStatusCode, code: string, message: string, issues?: FieldIssue[]): Response {
  return c.json(errorBody(code, message, issues), status);
}

/** Every failing field; `prefix` places issues of a nested value (e.g. `environment.options`). */
export function issuesOf(error: z.ZodError, prefix?: string): FieldIssue[] {
  return fieldIssues(error).map((i) => (prefix ? { ...i, path: i.path === '(root)' ? prefix : `${prefix}.${i.path}` } : i));
}

/** A 400 naming every failing field. */
export function invalid(c: Context, issues: FieldIssue[]): Response {
  return fail(c, 400, 'invalid_request', issues.map((i) => `${i.path}: ${i.message}`).join('; '), issues);
}

/** Raised by handlers below the routes for a 4xx that is the caller's doing. */
export class ApiProblem extends Error {
  constructor(
    readonly status: 400 | 404 | 409 | 422,
    readonly code: string,
    message: string,
    readonly issues?: FieldIssue[],
  ) {
    super(message);
  }
}

export function invalidProblem(issues: FieldIssue[]): ApiProblem {
  return new ApiProblem(400, 'invalid_request', issues.map((i) => `${i.path}: ${i.message}`).join('; '), issues);
}

export function notFound(what: string, id: string): ApiProblem {
  return new ApiProblem(404, 'not_found', `no ${what} ${JSON.stringify(id)}`);
}
