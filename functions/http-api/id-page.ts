/**
 * One page of a listing by id (GET /runs, GET /evaluations): the ids come from a delimiter listing of one
 * prefix (`runs/`, `evaluations/`), which names each id once however many objects lie below it, and only
 * the page's own items are read. Ids are in lexical order; `next` is the last id looked at when more remain.
 *
 * Invariant: the cost of a page is one delimiter listing plus at most `limit` reads per id tried, never a
 * read of every item or a listing of every object (test/api/listing-scale.test.ts).
 */
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { PageQuery } from '../../shared/schemas/index.ts';

export interface IdPage<T> {
  items: T[];
  next: string | null;
}

/** The ids directly under `prefix` (ending in `/`), lexical, as a delimiter listing names them. */
export async function idsUnder(store: ObjectStore, prefix: string): Promise<string[]> {
  return (await store.listChildren(prefix)).filter((k) => k.endsWith('/')).map((k) => k.slice(prefix.length, -1));
}

/**
 * The page of `ids` after `query.after`: each read with `read`, which answers null for an id that is not
 * an item (an evaluation's records share `runs/` with the runs), until `query.limit` items are found.
 */
export async function pageOf<T>(ids: readonly string[], query: PageQuery, read: (id: string) => Promise<T | null>): Promise<IdPage<T>> {
  const candidates = query.after === undefined ? ids : ids.filter((id) => id > query.after!);
  const items: T[] = [];
  let at = 0;
  while (items.length < query.limit && at < candidates.length) {
    const batch = candidates.slice(at, at + query.limit - items.length);
    at += batch.length;
    for (const item of await Promise.all(batch.map(read))) if (item !== null) items.push(item);
  }
  return { items, next: at < candidates.length ? candidates[at - 1]! : null };
}
