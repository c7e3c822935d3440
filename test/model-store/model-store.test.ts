/**
 * The model store end to end on both adapters (a directory, and S3 through a real s3rver): push a model
 * directory by content, list and pin it, pull it into the cache with every file's sha256 checked, and
 * open what was pulled with the loader. Also what must not happen: a directory that is no model is
 * refused before anything is sent, a half-done push lists no model, a blob that does not match its
 * manifest is refused naming the file and leaves no cache, a re-push does not move a pinned manifest.
 * And the model host that serves evaluations opens a pushed model through the same resolution.
 */
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { keys } from '../../shared/keys.ts';
import { listNamedModels, manifestBytes, manifestSha256, pinModelName, readManifest, readNamedModel, UnknownModelError } from '../../shared/model-catalog.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { EngineModelServer } from '../../trainer/jobs/model-server.ts';
import { loadModelDir } from '../../trainer/engine/model/model-dir.ts';
import { openModel } from '../../trainer/engine/model/open-model.ts';
import { cachedModelDir } from '../../trainer/training/model-store/model-cache.ts';
import { pushModel } from '../../trainer/training/model-store/push-model.ts';
import { removeModel } from '../../trainer/training/model-store/remove-model.ts';
import { resolveModelSpec } from '../../trainer/training/model-store/resolve-model.ts';

const DEMO = fileURLToPath(new URL('../../models/sudoku-4x4-demo', import.meta.url));
const GRID = fileURLToPath(new URL('../../models/sudoku-6x6-grid', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'esopt-model-store-'));
let s3: LocalS3;
let n = 0;

beforeAll(async () => {
  s3 = await startLocalS3('esopt-models');
});
afterAll(async () => {
  await s3?.close();
  rmSync(scratch, { recursive: true, force: true });
});

const subjects: { name: string; open(): Promise<ObjectStore> }[] = [
  { name: 'fs', open: async () => new FsObjectStore(join(scratch, `store-${n++}`)) },
  {
    name: 's3 (s3rver)',
    open: async () => {
      const store = new S3ObjectStore({ ...s3.storeConfig, bucket: `esopt-models-${n++}` });
      await (await store.sdkClient()).send(new CreateBucketCommand({ Bucket: store.config.bucket }));
      return store;
    },
  },
];

/** A fresh, empty cache root. */
const cache = () => join(scratch, `cache-${n++}`);
/** A copy of a model directory to change. */
function copyOf(dir: string): string {
  const to = join(scratch, `copy-${n++}`);
  cpSync(dir, to, { recursive: true });
  return to;
}

describe.each(subjects)('the model store: $name', (subject) => {
  it('pushes a directory by content, lists it, and pulls it into the cache as the loader opens it', async () => {
    const store = await subject.open();
    const pushed = await pushModel(store, DEMO, { name: 'demo' });
    expect(pushed.uploaded).toEqual(['config.json', 'model.onnx', 'model.onnx_data', 'tokenizer.json', 'tokenizer_config.json']);
    expect(pushed.alreadyStored).toEqual([]);
    const record = (await readNamedModel(store, 'demo'))!;
    expect(record.manifest.files.map((f) => [f.path, f.bytes])).toEqual(readdirSync(DEMO).sort().map((f) => [f, readFileSync(join(DEMO, f)).length]));
    expect(record.manifestSha256).toBe(pushed.manifestSha256);
    // The manifest is stored under its own sha256, as exactly the bytes that hash to it.
    expect(Buffer.from((await store.get(keys.modelManifest(pushed.manifestSha256)))!).equals(Buffer.from(manifestBytes(record.manifest)))).toBe(true);
    expect((await listNamedModels(store)).map((m) => m.name)).toEqual(['demo']);

    // The same files under another name: nothing is sent again; the grid model shares the tokenizer files.
    const again = await pushModel(store, DEMO, { name: 'demo-again' });
    expect(again.uploaded).toEqual([]);
    expect(again.manifestSha256).toBe(pushed.manifestSha256);
    const grid = await pushModel(store, GRID, { name: 'grid' });
    expect(grid.alreadyStored).toEqual(['config.json', 'tokenizer.json', 'tokenizer_config.json']);
    expect((await store.list(keys.modelBlobs())).length).toBe(7);

    const root = cache();
    const local = await resolveModelSpec({ name: 'demo' }, store, { cacheRoot: root });
    expect(local).toEqual({ dir: cachedModelDir(root, pushed.manifestSha256) });
    for (const f of readdirSync(DEMO)) expect(readFileSync(join((local as { dir: string }).dir, f)).equals(readFileSync(join(DEMO, f))), f).toBe(true);
    const opened = openModel(local);
    const original = loadModelDir(DEMO);
    expect(opened.weights.map((w) => w.name)).toEqual(original.weights.map((w) => w.name));
    expect(opened.weights.every((w, i) => Buffer.from(w.data.buffer, w.data.byteOffset, w.data.byteLength).equals(Buffer.from(original.weights[i].data.buffer, original.weights[i].data.byteOffset, original.weights[i].data.byteLength)))).toBe(true);
    // Nothing but the model was left in the cache (no partial directories).
    expect(readdirSync(join(root, 'store'))).toEqual([pushed.manifestSha256]);
  });

  it('downloads once: a second resolution reads no blob', async () => {
    const store = await subject.open();
    const { manifestSha256: sha } = await pushModel(store, DEMO, { name: 'demo' });
    const root = cache();
    await resolveModelSpec({ name: 'demo', manifest: sha }, store, { cacheRoot: root });
    const fetched: string[] = [];
    const counting: ObjectStore = { ...bound(store), getToFile: (k, p, o) => (fetched.push(k), store.getToFile(k, p, o)) };
    expect(await resolveModelSpec({ name: 'demo', manifest: sha }, counting, { cacheRoot: root })).toEqual({ dir: cachedModelDir(root, sha) });
    expect(fetched).toEqual([]);
  });

  it('pins: a re-pushed name moves, the pinned manifest does not', async () => {
    const store = await subject.open();
    const first = await pushModel(store, DEMO, { name: 'm' });
    expect(await pinModelName(store, { name: 'm' })).toEqual({ name: 'm', manifest: first.manifestSha256 });
    const second = await pushModel(store, GRID, { name: 'm' });
    expect(second.manifestSha256).not.toBe(first.manifestSha256);
    expect(await pinModelName(store, { name: 'm' })).toEqual({ name: 'm', manifest: second.manifestSha256 });
    expect(await pinModelName(store, { name: 'm', manifest: first.manifestSha256 })).toEqual({ name: 'm', manifest: first.manifestSha256 });
    const root = cache();
    const pinned = (await resolveModelSpec({ name: 'm', manifest: first.manifestSha256 }, store, { cacheRoot: root })) as { dir: string };
    expect(readFileSync(join(pinned.dir, 'model.onnx_data')).equals(readFileSync(join(DEMO, 'model.onnx_data')))).toBe(true);
    const current = (await resolveModelSpec({ name: 'm' }, store, { cacheRoot: root })) as { dir: string };
    expect(readFileSync(join(current.dir, 'model.onnx_data')).equals(readFileSync(join(GRID, 'model.onnx_data')))).toBe(true);

    await expect(pinModelName(store, { name: 'nobody' })).rejects.toMatchObject({ field: 'name', message: expect.stringMatching(/no model named "nobody".*esopt models push DIR --name nobody/) });
    await expect(pinModelName(store, { name: 'm', manifest: 'f'.repeat(64) })).rejects.toBeInstanceOf(UnknownModelError);
    await expect(pinModelName(store, { name: 'm', manifest: 'f'.repeat(64) })).rejects.toMatchObject({ field: 'manifest' });
  });

  it('refuses a directory that is no loadable model before it sends anything', async () => {
    const store = await subject.open();
    const noTokenizer = copyOf(DEMO);
    rmSync(join(noTokenizer, 'tokenizer.json'));
    await expect(pushModel(store, noTokenizer, { name: 'broken' })).rejects.toThrow(/is missing tokenizer\.json/);
    const badConfig = copyOf(DEMO);
    writeFileSync(join(badConfig, 'config.json'), '{"hidden_size": ');
    await expect(pushModel(store, badConfig, { name: 'broken' })).rejects.toThrow(/config\.json/);
    await expect(pushModel(store, DEMO, { name: 'not a name' })).rejects.toThrow(/model name "not a name"/);
    expect(await store.list('models/')).toEqual([]);
  });

  it('a push that fails half way leaves blobs but lists no model', async () => {
    const store = await subject.open();
    let sent = 0;
    const failing: ObjectStore = {
      ...bound(store),
      putFile: async (k, p, o) => {
        if (++sent === 3) throw new Error('connection reset');
        return store.putFile(k, p, o);
      },
    };
    await expect(pushModel(failing, DEMO, { name: 'half' })).rejects.toThrow('connection reset');
    expect(await listNamedModels(store)).toEqual([]);
    expect(await store.list(keys.modelNames())).toEqual([]);
    expect((await store.list(keys.modelBlobs())).length).toBe(2);
    // Pushed again, it sends only what is missing.
    const done = await pushModel(store, DEMO, { name: 'half' });
    expect(done.alreadyStored).toEqual(['config.json', 'model.onnx']);
    expect((await listNamedModels(store)).map((m) => m.name)).toEqual(['half']);
  });

  it('refuses a blob that does not match its manifest, naming the file, and caches nothing', async () => {
    const store = await subject.open();
    const pushed = await pushModel(store, DEMO, { name: 'demo' });
    const record = (await readNamedModel(store, 'demo'))!;
    const data = record.manifest.files.find((f) => f.path === 'model.onnx_data')!;
    const tampered = Buffer.from(readFileSync(join(DEMO, 'model.onnx_data')));
    tampered[100] ^= 1;
    await store.put(keys.modelBlob(data.sha256), tampered);
    const root = cache();
    await expect(resolveModelSpec({ name: 'demo' }, store, { cacheRoot: root })).rejects.toThrow(new RegExp(`model demo@${pushed.manifestSha256.slice(0, 12)}: model\\.onnx_data does not match its manifest`));
    expect(existsSync(cachedModelDir(root, pushed.manifestSha256))).toBe(false);
    expect(existsSync(join(root, 'store')) ? readdirSync(join(root, 'store')) : []).toEqual([]);
    // A missing blob is named too.
    await store.delete(keys.modelBlob(data.sha256));
    await expect(resolveModelSpec({ name: 'demo' }, store, { cacheRoot: root })).rejects.toThrow(/model\.onnx_data is missing from the store/);
  });

  it('rm removes the name and keeps the blobs; --prune deletes what no remaining name uses', async () => {
    const store = await subject.open();
    const demo = await pushModel(store, DEMO, { name: 'demo' });
    const grid = await pushModel(store, GRID, { name: 'grid' });
    const removed = await removeModel(store, 'demo');
    expect(removed).toEqual({ name: 'demo', removed: true, prunedBlobs: [], prunedManifests: [], pinnedManifests: [], keptRecent: 0 });
    expect((await listNamedModels(store)).map((m) => m.name)).toEqual(['grid']);
    expect((await store.list(keys.modelBlobs())).length).toBe(7);
    // A run pinned to the removed name's manifest still resolves.
    expect(await readManifest(store, demo.manifestSha256)).not.toBeNull();
    const pruned = await removeModel(store, 'demo', { prune: true, graceMs: 0 });
    expect(pruned.removed).toBe(false);
    const demoOnly = (m: string) => !['config.json', 'tokenizer.json', 'tokenizer_config.json'].includes(m);
    const gridRecord = (await readNamedModel(store, 'grid'))!;
    expect(pruned.prunedManifests).toEqual([demo.manifestSha256]);
    expect(pruned.prunedBlobs).toHaveLength(2);
    expect(pruned.prunedBlobs.every((sha) => !gridRecord.manifest.files.some((f) => f.sha256 === sha))).toBe(true);
    expect(readdirSync(DEMO).filter(demoOnly)).toEqual(['model.onnx', 'model.onnx_data']);
    expect((await store.list(keys.modelBlobs())).length).toBe(5);
    expect(await readManifest(store, grid.manifestSha256)).not.toBeNull();
    expect(await resolveModelSpec({ name: 'grid' }, store, { cacheRoot: cache() })).toHaveProperty('dir');
  });
});

describe('the model host (evaluations of a base model)', () => {
  it('serves a pushed model by its pinned manifest, pulled into the cache first', async () => {
    const store = new FsObjectStore(join(scratch, `store-${n++}`));
    const { manifestSha256 } = await pushModel(store, DEMO, { name: 'demo' });
    const root = cache();
    const saved = process.env.ESOPT_MODEL_CACHE;
    process.env.ESOPT_MODEL_CACHE = root;
    try {
      const served = await new EngineModelServer(store).serve({ kind: 'base', model: { name: 'demo', manifest: manifestSha256 } });
      try {
        const res = await fetch(`${served.baseUrl}/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${served.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: served.model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, temperature: 0 }),
        });
        expect(res.status).toBe(200);
      } finally {
        await served.close();
      }
    } finally {
      if (saved === undefined) delete process.env.ESOPT_MODEL_CACHE;
      else process.env.ESOPT_MODEL_CACHE = saved;
    }
    expect(readdirSync(join(root, 'store'))).toEqual([manifestSha256]);
  });
});

describe('the manifest', () => {
  it('hashes its canonical bytes: the same files in any key order give one sha256', () => {
    const a = { files: [{ path: 'a.json', bytes: 1, sha256: '0'.repeat(64) }] };
    const b = { files: [{ sha256: '0'.repeat(64), bytes: 1, path: 'a.json' }] };
    expect(manifestSha256(a)).toBe(manifestSha256(b));
    expect(new TextDecoder().decode(manifestBytes(b))).toBe(`{"files":[{"path":"a.json","bytes":1,"sha256":"${'0'.repeat(64)}"}]}`);
  });

  it('refuses unsorted or repeated paths, a file inside a file, and paths that climb out', () => {
    const f = (path: string) => ({ path, bytes: 0, sha256: '0'.repeat(64) });
    expect(() => manifestBytes({ files: [f('b'), f('a')] })).toThrow(/sorted by path/);
    expect(() => manifestBytes({ files: [f('a'), f('a')] })).toThrow(/sorted by path/);
    expect(() => manifestBytes({ files: [f('a'), f('a-b'), f('a/b')] })).toThrow(/"a" is a file/);
    for (const bad of ['../x', '/abs', 'a//b', 'a\\b', './a']) expect(() => manifestBytes({ files: [f(bad)] }), bad).toThrow(/relative path/);
  });
});

/** A store's methods as plain functions, to spread into a wrapper. */
function bound(store: ObjectStore): ObjectStore {
  return {
    put: (k, b, o) => store.put(k, b, o),
    get: (k) => store.get(k),
    putFile: (k, p, o) => store.putFile(k, p, o),
    getToFile: (k, p, o) => store.getToFile(k, p, o),
    list: (p) => store.list(p),
    listObjects: (p) => store.listObjects(p),
    listChildren: (p) => store.listChildren(p),
    delete: (k) => store.delete(k),
  };
}
