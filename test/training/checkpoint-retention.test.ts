/**
 * Old checkpoints do not accumulate: after each checkpoint the trainer keeps the newest `checkpointKeep`, and
 * θ at any earlier iteration is still exact (θ_0 or an older kept checkpoint, replayed through the log).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { RunConfig } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { exportModel } from '../../trainer/training/export/export-model.ts';
import { loadLatestCheckpoint, pruneCheckpoints, writeCheckpoint } from '../../trainer/training/loop/checkpoints.ts';
import { baseConfig, esopt } from './helpers/killable-run.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-checkpoint-keep-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('checkpoint retention', () => {
  it('deletes all but the newest finished checkpoints, and unfinished ones older than those, meta first', async () => {
    const store = new FsObjectStore(join(root, 'unit'));
    const segment = (v: number) => [{ name: 'w', offset: 0, data: new Float32Array([v, v + 1]) }];
    for (const k of [1, 2, 3, 4, 5]) await writeCheckpoint(store, 'r', k, segment(k));
    // checkpoint 2 was never finished (its meta missing), 6 is being written now (weights only)
    await store.delete(keys.checkpointMeta('r', 2));
    await store.put(keys.checkpointWeights('r', 6), new Uint8Array(8));
    expect(await pruneCheckpoints(store, 'r', 2)).toEqual([1, 2, 3]);
    expect((await store.list(keys.checkpoints('r'))).sort()).toEqual([keys.checkpointMeta('r', 4), keys.checkpointWeights('r', 4), keys.checkpointMeta('r', 5), keys.checkpointWeights('r', 5), keys.checkpointWeights('r', 6)].sort());
    expect(await pruneCheckpoints(store, 'r', 2)).toEqual([]);
    const into = segment(0);
    expect((await loadLatestCheckpoint(store, 'r', into, 4))?.meta.iteration).toBe(4);
    expect(await loadLatestCheckpoint(store, 'r', into, 3)).toBeNull();
  });

  it('keeps checkpointKeep checkpoints of a trained run, and θ at a pruned iteration still exports exactly', async () => {
    const store = join(root, 'store');
    const config = join(root, 'config.json');
    writeFileSync(config, JSON.stringify({ ...baseConfig, iterations: 4, checkpointInterval: 1, checkpointKeep: 2 }));
    const out = await esopt(['train', '--config', config, '--run', 'kept', '--store', store, '--json']);
    expect(out.code, out.stderr).toBe(0);
    const fs = new FsObjectStore(store);
    const finished = (await fs.list(keys.checkpoints('kept'))).filter((k) => k.endsWith('meta.json'));
    expect(finished).toEqual([keys.checkpointMeta('kept', 3), keys.checkpointMeta('kept', 4)]);
    const log = readFileSync(join(store, keys.log('kept')), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { iteration: number; thetaHashAfter: string });
    // θ_2: no checkpoint at or before it is left, so θ_0 and two log entries
    const early = await exportModel({ store: fs, run: 'kept', iteration: 2, out: join(root, 'theta2'), format: 'safetensors' });
    expect(early).toMatchObject({ checkpoint: null, thetaHash: log[1]!.thetaHashAfter });
    const late = await exportModel({ store: fs, run: 'kept', iteration: 4, out: join(root, 'theta4'), format: 'safetensors' });
    expect(late).toMatchObject({ checkpoint: 4, thetaHash: log[3]!.thetaHashAfter });
  }, 60_000);

  it('refuses a checkpointKeep below 1, naming the field', () => {
    const r = RunConfig.safeParse({ ...baseConfig, checkpointKeep: 0 });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.path).toEqual(['checkpointKeep']);
  });
});
