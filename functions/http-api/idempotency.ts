/**
 * `Idempotency-Key` on POSTs, kept in the ObjectStore so it holds across Lambda instances:
 *   same key + same body → the stored response again (header `Idempotent-Replayed: true`), nothing created twice;
 *   same key + another body → 422;
 *   same key while the first request is still being handled → 409 (retry shortly).
 * The key is claimed create-only before the handler runs, so of two racing retries exactly one runs it.
 * 5xx responses are not stored: the claim is released so a retry can try again.
 */
import { createHash } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { z } from 'zod';
import { keys } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { fail } from './errors.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';

const HEADER = 'idempotency-key';
/** A claim older than this belongs to a request that died half-way; a retry may take it over. */
const ABANDONED_AFTER_MS = 60_000;

const IdempotencyRecord = z.discriminatedUnion('state', [
  z.object({ state: z.literal('pending'), bodyHash: z.string(), claimedAt: z.number() }),
  z.object({ state: z.literal('done'), bodyHash: z.string(), status: z.number().int(), body: z.string(), contentType: z.string() }),
]);
type IdempotencyRecord = z.infer<typeof IdempotencyRecord>;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

export function idempotency(store: ObjectStore): MiddlewareHandler {
  return async (c, next) => {
    const given = c.req.header(HEADER);
    if (c.req.method !== 'POST' || given === undefined) return next();
    if (!/^[\x21-\x7e]{1,255}$/.test(given)) {
      return fail(c, 400, 'invalid_idempotency_key', 'Idempotency-Key must be 1-255 visible ASCII characters', [{ path: 'Idempotency-Key', message: 'invalid' }]);
    }
    const key = keys.idempotency(sha256(`${c.req.method} ${c.req.path}\n${given}`));
    const bodyHash = sha256(await c.req.text());

    for (let attempt = 0; ; attempt++) {
      const existing = await readJson(store, key, IdempotencyRecord);
      if (existing) {
        if (existing.bodyHash !== bodyHash) {
          return fail(c, 422, 'idempotency_key_reused', 'this Idempotency-Key was used with a different body; use a new key for a new request');
        }
        if (existing.state === 'done') {
          return new Response(existing.body, { status: existing.status, headers: { 'Content-Type': existing.contentType, 'Idempotent-Replayed': 'true' } });
        }
        if (Date.now() - existing.claimedAt < ABANDONED_AFTER_MS || attempt > 0) {
          c.header('Retry-After', '1');
          return fail(c, 409, 'idempotency_in_progress', 'a request with this Idempotency-Key is still being handled; retry shortly');
        }
        await store.delete(key);
      }
      const claim: IdempotencyRecord = { state: 'pending', bodyHash, claimedAt: Date.now() };
      if (await writeJson(store, key, claim, true)) break;
    }

    await next();
    const res = c.res;
    if (res.status >= 500) {
      await store.delete(key);
      return;
    }
    const done: IdempotencyRecord = { state: 'done', bodyHash, status: res.status, body: await res.clone().text(), contentType: res.headers.get('content-type') ?? 'application/json' };
    await writeJson(store, key, done);
  };
}
