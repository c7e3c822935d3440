/**
 * One pino line per request: method, path (never the query string), status, duration and a request id.
 * Headers are not logged at all, so the bearer token cannot reach the log.
 */
import { randomUUID } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';

export function requestLog(log: Logger): MiddlewareHandler {
  return async (c, next) => {
    const started = performance.now();
    const id = c.req.header('x-request-id')?.slice(0, 100) ?? randomUUID();
    c.header('X-Request-Id', id);
    await next();
    const status = c.res.status;
    const fields = { req: id, method: c.req.method, path: c.req.path, status, ms: Math.round((performance.now() - started) * 10) / 10 };
    if (status >= 500) log.error(fields, 'request failed');
    else log.info(fields, 'request');
  };
}
