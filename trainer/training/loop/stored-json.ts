/** JSON documents in the object store, parsed through their zod schema on the way out. */
import type { ObjectStore } from '../../../shared/ports/object-store.ts';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The document at `key`, or null when there is none. */
export async function getJson<T>(store: ObjectStore, key: string, schema: { parse: (v: unknown) => T }): Promise<T | null> {
  const body = await store.get(key);
  return body ? schema.parse(JSON.parse(decoder.decode(body))) : null;
}

/** With `ifAbsent`, create-only: resolves false when the key was already there. */
export function putJson(store: ObjectStore, key: string, value: unknown, ifAbsent = false): Promise<boolean> {
  return store.put(key, encoder.encode(JSON.stringify(value)), { ifAbsent, contentType: 'application/json' });
}
