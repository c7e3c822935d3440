/**
 * The model store keeps what is pinned: a prune leaves every manifest a run or an evaluation pins (ran,
 * running or queued) and their blobs, every blob newer than the grace period, and every blob a push under
 * way found stored; a push refuses a link out of its directory, but takes a Hugging Face cache snapshot,
 * whose files are links into the cache's blobs.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { readNamedModel } from '../../shared/model-catalog.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { writeJson } from '../../shared/store/json.ts';
import { pushModel } from '../../trainer/training/model-store/push-model.ts';
import { removeModel } from '../../trainer/training/model-store/remove-model.ts';

const DEMO = fileURLToPath(new URL('../../models/sudoku-4x4-demo', import.meta.url));
const GRID = fileURLToPath(new URL('../../models/sudoku-6x6-grid', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'esopt-model-keeps-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let n = 0;
const fresh = () => new FsObjectStore(join(scratch, `store-${n++}`));
/** A day and an hour from now: past the default grace period of a day. */
const later = () => new Date(Date.now() + 25 * 3_600_000);
/** Every blob and manifest in the store written `hours` ago, as its last write says (a file's mtime). */
async function age(store: FsObjectStore, hours: number) {
  const then = new Date(Date.now() - hours * 3_600_000);
  for (const k of [...(await store.list(keys.modelBlobs())), ...(await store.list(keys.modelManifests()))]) utimesSync(join(store.root, ...k.split('/')), then, then);
}
const blobCount = async (store: ObjectStore) => (await store.list(keys.modelBlobs())).length;

describe('prune', () => {
  it('keeps the manifests runs and evaluations pin, queued or done, and their blobs; deletes the rest', async () => {
    const store = fresh();
    const demo = await pushModel(store, DEMO, { name: 'demo' });
    const grid = await pushModel(store, GRID, { name: 'grid' });
    const pinned = { name: 'demo', manifest: demo.manifestSha256 };
    // A run that ran, one that waits in the queue, and a queued evaluation of the base model, each pinned to demo's manifest.
    await writeJson(store, keys.config('done-run'), { model: pinned, iterations: 2 });
    await writeJson(store, keys.config('queued-run'), { model: pinned, iterations: 2 });
    await writeJson(store, keys.queuedWork('run', 'queued-run'), { kind: 'run', id: 'queued-run', queuedAt: new Date().toISOString() });
    await writeJson(store, keys.evaluationRequest('eval-1'), { model: { kind: 'base', model: pinned }, episodes: 4 });
    await writeJson(store, keys.config('preset-run'), { model: { preset: 'tiny', seed: 0 } });
    await removeModel(store, 'demo');
    await removeModel(store, 'grid');

    const pruned = await removeModel(store, 'grid', { prune: true, now: later() });
    expect(pruned.prunedManifests).toEqual([grid.manifestSha256]);
    expect(pruned.pinnedManifests).toEqual([{ manifest: demo.manifestSha256, by: ['run done-run', 'run queued-run', 'evaluation eval-1'] }]);
    expect(await store.get(keys.modelManifest(demo.manifestSha256))).not.toBeNull();
    // Every blob of the pinned manifest is there; only grid's own two are gone.
    expect(await blobCount(store)).toBe(5);
    expect(pruned.prunedBlobs).toHaveLength(2);
  });

  it('keeps blobs and manifests newer than the grace period, and deletes them once it has passed', async () => {
    const store = fresh();
    await pushModel(store, DEMO, { name: 'demo' });
    await removeModel(store, 'demo');
    const soon = await removeModel(store, 'demo', { prune: true });
    expect(soon).toMatchObject({ prunedBlobs: [], prunedManifests: [], keptRecent: 6 });
    expect(await blobCount(store)).toBe(5);
    const shortGrace = await removeModel(store, 'demo', { prune: true, graceMs: 3_600_000, now: new Date(Date.now() + 2 * 3_600_000) });
    expect(shortGrace.prunedBlobs).toHaveLength(5);
    expect(await blobCount(store)).toBe(0);
  });

  it('keeps a blob a push under way found stored and did not send: the name it writes has every blob', async () => {
    const store = fresh();
    await pushModel(store, DEMO, { name: 'demo' });
    await removeModel(store, 'demo');
    await age(store, 25);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let found!: () => void;
    const foundStored = new Promise<void>((resolve) => (found = resolve));
    let calls = 0;
    // The push finds its first blob stored, then waits there while a prune runs.
    const slow: ObjectStore = Object.assign(Object.create(store) as ObjectStore, {
      putFile: async (k: string, p: string, o: Parameters<ObjectStore['putFile']>[2]) => {
        const stored = await store.putFile(k, p, o);
        if (calls++ === 0) {
          found();
          await held;
        }
        return stored;
      },
    });
    const push = pushModel(slow, DEMO, { name: 'again' });
    await foundStored;
    const pruned = await removeModel(store, 'demo', { prune: true });
    release();
    const again = await push;
    expect(again.alreadyStored.length).toBeGreaterThan(0);
    // The manifest no name points at goes; the blobs the push will name stay.
    expect(pruned.prunedManifests).toHaveLength(1);
    expect(pruned.prunedBlobs).toEqual([]);
    const record = (await readNamedModel(store, 'again'))!;
    for (const f of record.manifest.files) expect(await store.get(keys.modelBlob(f.sha256)), f.path).not.toBeNull();
    // The push's record goes with its end.
    expect(await store.list(keys.modelPushes())).toEqual([]);
  });
});

describe('push and links', () => {
  it('refuses a link that leaves the directory, naming it, and sends nothing', async () => {
    const store = fresh();
    const dir = join(scratch, 'linked-out');
    mkdirSync(dir);
    for (const f of readdirSync(DEMO)) copyFileSync(join(DEMO, f), join(dir, f));
    writeFileSync(join(scratch, 'id_rsa'), 'a key that is not the model\n');
    symlinkSync(join(scratch, 'id_rsa'), join(dir, 'notes.txt'));
    await expect(pushModel(store, dir, { name: 'linked' })).rejects.toThrow(/notes\.txt: a link out of the model's directory/);
    expect(await store.list('models/')).toEqual([]);
    // A link that stays inside is followed.
    rmSync(join(dir, 'notes.txt'));
    symlinkSync(join(dir, 'config.json'), join(dir, 'config-copy.json'));
    expect((await pushModel(store, dir, { name: 'linked' })).files).toBe(6);
  });

  it("takes a Hugging Face cache snapshot, whose files link into the cache's blobs", async () => {
    const store = fresh();
    const repo = join(scratch, 'hub', 'models--esopt--demo');
    const snapshot = join(repo, 'snapshots', 'abc123');
    mkdirSync(join(repo, 'blobs'), { recursive: true });
    mkdirSync(snapshot, { recursive: true });
    for (const [i, f] of readdirSync(DEMO).entries()) {
      copyFileSync(join(DEMO, f), join(repo, 'blobs', `blob${i}`));
      symlinkSync(join('..', '..', 'blobs', `blob${i}`), join(snapshot, f));
    }
    const pushed = await pushModel(store, snapshot, { name: 'from-cache' });
    expect(pushed.files).toBe(5);
    // The same links from a directory that is no snapshot leave it.
    const elsewhere = join(scratch, 'not-a-snapshot');
    mkdirSync(elsewhere);
    for (const [i, f] of readdirSync(DEMO).entries()) symlinkSync(join(repo, 'blobs', `blob${i}`), join(elsewhere, f));
    await expect(pushModel(fresh(), elsewhere, { name: 'elsewhere' })).rejects.toThrow(/a link out of the model's directory/);
    expect(existsSync(join(snapshot, 'config.json'))).toBe(true);
  });
});
