/**
 * A warm worker reads a secret once a minute at most: every episode of a keyed evaluation names the same
 * secret, and SSM's GetParameter has an account-wide rate (40/s by default) that a large fan-out would
 * otherwise spend. Only values are cached: a missing secret is read again, so a late write is seen.
 */
import type { SecretStore } from '../shared/ports/secret-store.ts';

export const SECRET_CACHE_MS = 60_000;

export function cachedSecrets(secrets: SecretStore, ttlMs = SECRET_CACHE_MS, now: () => number = Date.now): SecretStore {
  const cache = new Map<string, { value: Promise<string | null>; until: number }>();
  return {
    create: (name, value, expiresAt) => secrets.create(name, value, expiresAt),
    delete: (name) => (cache.delete(name), secrets.delete(name)),
    async get(name) {
      const hit = cache.get(name);
      if (hit && hit.until > now()) return hit.value;
      const value = secrets.get(name);
      cache.set(name, { value, until: now() + ttlMs });
      // A failed or empty read is not kept.
      value.then((v) => v === null && cache.delete(name), () => cache.delete(name));
      return value;
    },
  };
}
