/** Bearer auth on everything except the public paths (health, the OpenAPI document, docs, the dashboard shell). */
import type { MiddlewareHandler } from 'hono';
import { bearerToken, tokenMatches } from '../../shared/bearer-token.ts';
import { fail } from './errors.ts';

export function bearerAuth(token: string, isPublic: (path: string) => boolean): MiddlewareHandler {
  if (token.length === 0) throw new Error('the API token must not be empty (set ESOPT_TOKEN)');
  return async (c, next) => {
    if (isPublic(c.req.path)) return next();
    const given = bearerToken(c.req.header('authorization'));
    if (given === null || !tokenMatches(given, token)) {
      c.header('WWW-Authenticate', 'Bearer');
      return fail(c, 401, 'unauthorized', 'missing or wrong bearer token (Authorization: Bearer <ESOPT_TOKEN>)');
    }
    await next();
  };
}
