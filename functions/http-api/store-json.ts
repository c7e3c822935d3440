/** JSON objects in the ObjectStore, parsed by their schema on the way out. */
import type { z } from 'zod';
import type { ObjectStore } from '../../shared/ports/object-store.ts';

const decoder = new TextDecoder();

export async function readJson<S extends z.ZodType>(store: ObjectStore, key: string, schema: S): Promise<z.infer<S> | null> {
  const body = await store.get(key);
  return body === null ? null : schema.parse(JSON.parse(decoder.decode(body)));
}

/** Resolves false when `ifAbsent` found the key there already. */
export function writeJson(store: ObjectStore, key: string, value: unknown, ifAbsent = false): Promise<boolean> {
  return store.put(key, JSON.stringify(value), { ifAbsent, contentType: 'application/json' });
}

/** Reads many keys a few at a time, in order; missing ones are dropped. */
export async function readAllJson<S extends z.ZodType>(store: ObjectStore, keys: readonly string[], schema: S, parallel = 16): Promise<z.infer<S>[]> {
  const out: (z.infer<S> | null)[] = new Array(keys.length).fill(null);
  for (let i = 0; i < keys.length; i += parallel) {
    const chunk = keys.slice(i, i + parallel);
    const values = await Promise.all(chunk.map((k) => readJson(store, k, schema)));
    values.forEach((v, j) => (out[i + j] = v));
  }
  return out.filter((v): v is z.infer<S> => v !== null);
}
