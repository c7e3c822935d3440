/**
 * Bearer auth on everything except the public paths (health, the OpenAPI document, docs, the dashboard shell).
 * A request that passes carries its caller (the SHA-256 of its token, never the token) for the middleware
 * after it (rate limits), so this file is the only one of the API that reads the Authorization header.
 */
import { createHash } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
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
    c.set(CALLER, createHash('sha256').update(given).digest('hex'));
    await next();
  };
}

const CALLER = 'esoptCaller' as never;

/** The caller bearerAuth let through (a digest of its token), or null on a public path. */
export function callerOf(c: Context): string | null {
  return (c.get(CALLER) as string | undefined) ?? null;
}
