/**
 * Requests per token, as a token bucket: each caller (its token's SHA-256, as bearerAuth hands it on; never the token) may send
 * `burst` requests at once and `perSecond` a second after that; past it, 429 `rate_limited` with
 * Retry-After. The public paths (health, docs, the dashboard shell) are not counted, so /healthz answers
 * whatever a caller sends.
 *
 * The buckets live in the process: on Lambda, each instance of the Api function counts on its own, so a
 * caller's ceiling is `perSecond` × the function's reserved concurrency (sst.config.ts, docs/CLOUD.md).
 * Buckets idle long enough to be full again are dropped, so the map holds only recent callers.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { callerOf } from './auth.ts';
import { fail } from './errors.ts';

export interface RateLimit {
  /** Requests a second a token may send, sustained. */
  perSecond: number;
  /** Requests a token may send at once. */
  burst: number;
}

/** The default: a dashboard and a CLI polling several runs stay far below it; a loop calling as fast as it can does not. */
export const DEFAULT_RATE_LIMIT: RateLimit = { perSecond: 20, burst: 60 };

interface Bucket {
  tokens: number;
  at: number;
}

/** Counts the callers bearerAuth let through (`callerOf`); it runs after it, and public paths have no caller. */
export function rateLimit(limit: RateLimit, now: () => number = Date.now, caller: (c: Context) => string | null = callerOf): MiddlewareHandler {
  if (!(limit.perSecond > 0) || !(limit.burst >= 1)) throw new Error(`a rate limit needs perSecond > 0 and burst ≥ 1 (got ${JSON.stringify(limit)})`);
  const buckets = new Map<string, Bucket>();
  const fullAfterMs = (limit.burst / limit.perSecond) * 1000;
  return async (c, next) => {
    const key = caller(c);
    if (key === null) return next();
    const t = now();
    if (buckets.size > 10_000) for (const [k, b] of buckets) if (t - b.at > fullAfterMs) buckets.delete(k);
    const bucket = buckets.get(key) ?? { tokens: limit.burst, at: t };
    bucket.tokens = Math.min(limit.burst, bucket.tokens + ((t - bucket.at) / 1000) * limit.perSecond);
    bucket.at = t;
    buckets.set(key, bucket);
    if (bucket.tokens < 1) {
      c.header('Retry-After', String(Math.max(1, Math.ceil((1 - bucket.tokens) / limit.perSecond))));
      return fail(c, 429, 'rate_limited', `more than ${limit.perSecond} requests a second (bursts of ${limit.burst}) with this token: slow down and retry after the Retry-After seconds`);
    }
    bucket.tokens -= 1;
    await next();
  };
}
