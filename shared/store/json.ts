/**
 * JSON documents in the object store, parsed through their schema on the way out: the one way the API,
 * the trainer and the Episode function read and write a JSON object of the store.
 */
import type { ObjectStore, PutOptions } from '../ports/object-store.ts';

/** A zod schema, or anything else that turns parsed JSON into a T (and throws on what is not one). */
export interface JsonSchema<T> {
  parse(value: unknown): T;
}

const decoder = new TextDecoder();

/**
 * The document at `key` through `schema`; null only when there is no object at `key`.
 * An empty (0-byte) object throws like any malformed one, as it did with both former helpers: the loop's
 * `body ? … : null` tested a Uint8Array, which is truthy even when empty, so it only ever caught null.
 */
export async function readJson<T>(store: Pick<ObjectStore, 'get'>, key: string, schema: JsonSchema<T>): Promise<T | null> {
  const body = await store.get(key);
  return body === null ? null : schema.parse(JSON.parse(decoder.decode(body)));
}

export interface WriteJsonOptions extends Pick<PutOptions, 'tags'> {
  /** Indented, for a document people open (a run's report); compact otherwise. */
  pretty?: boolean;
}

/** With `ifAbsent`, create-only: resolves false when the key was already there (nothing is written then). */
export function writeJson(store: Pick<ObjectStore, 'put'>, key: string, value: unknown, ifAbsent = false, o: WriteJsonOptions = {}): Promise<boolean> {
  const body = o.pretty ? JSON.stringify(value, null, 2) : JSON.stringify(value);
  return store.put(key, body, { ifAbsent, contentType: 'application/json', ...(o.tags ? { tags: o.tags } : {}) });
}

/** Many keys read a few at a time (`parallel` at once), in order; missing ones are dropped. */
export async function readAllJson<T>(store: Pick<ObjectStore, 'get'>, keys: readonly string[], schema: JsonSchema<T>, parallel = 16): Promise<T[]> {
  const out: (T | null)[] = new Array<T | null>(keys.length).fill(null);
  for (let i = 0; i < keys.length; i += parallel) {
    const chunk = keys.slice(i, i + parallel);
    const values = await Promise.all(chunk.map((k) => readJson(store, k, schema)));
    values.forEach((v, j) => (out[i + j] = v));
  }
  return out.filter((v): v is T => v !== null);
}
