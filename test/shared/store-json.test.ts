/** shared/store/json.ts, the one JSON helper for the store: what null means, create-only writes, pretty, tags, many reads. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { PutOptions } from '../../shared/ports/object-store.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { readAllJson, readJson, writeJson } from '../../shared/store/json.ts';

const dir = mkdtempSync(join(tmpdir(), 'esopt-store-json-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const store = new FsObjectStore(dir);
const Doc = z.object({ n: z.number() }).strict();

describe('shared/store/json', () => {
  it('reads null only for a missing key; an empty, malformed or off-schema object throws', async () => {
    expect(await readJson(store, 'missing.json', Doc)).toBeNull();
    await store.put('empty.json', new Uint8Array(0));
    await expect(readJson(store, 'empty.json', Doc)).rejects.toThrow(SyntaxError);
    await store.put('bad.json', '{"n":');
    await expect(readJson(store, 'bad.json', Doc)).rejects.toThrow(SyntaxError);
    await store.put('other.json', '{"m":1}');
    await expect(readJson(store, 'other.json', Doc)).rejects.toThrow();
  });

  it('writes compact JSON, create-only when asked, and indented for people when asked', async () => {
    expect(await writeJson(store, 'a.json', { n: 1 })).toBe(true);
    expect(await writeJson(store, 'a.json', { n: 2 }, true)).toBe(false);
    expect(await readJson(store, 'a.json', Doc)).toEqual({ n: 1 });
    expect(readFileSync(join(dir, 'a.json'), 'utf8')).toBe('{"n":1}');
    await writeJson(store, 'pretty.json', { n: 3 }, false, { pretty: true });
    expect(readFileSync(join(dir, 'pretty.json'), 'utf8')).toBe('{\n  "n": 3\n}');
  });

  it('puts as application/json, with tags only when given', async () => {
    const seen: (PutOptions | undefined)[] = [];
    const spy = { put: async (_k: string, _b: Uint8Array | string, o?: PutOptions) => (seen.push(o), true) };
    await writeJson(spy, 'k', 1);
    await writeJson(spy, 'k', 1, true, { tags: { kind: 'transcript' } });
    expect(seen).toEqual([
      { ifAbsent: false, contentType: 'application/json' },
      { ifAbsent: true, contentType: 'application/json', tags: { kind: 'transcript' } },
    ]);
  });

  it('reads many keys in order, a few at a time, dropping missing ones', async () => {
    const keys = Array.from({ length: 7 }, (_, i) => `many/${i}.json`);
    for (const [i, k] of keys.entries()) if (i !== 3) await writeJson(store, k, { n: i });
    expect(await readAllJson(store, keys, Doc, 2)).toEqual([0, 1, 2, 4, 5, 6].map((n) => ({ n })));
  });
});
