/**
 * θ_K from a run's store: the newest verified checkpoint at or below K plus the log through iteration
 * K − 1, checked against every logged θ hash, in full and low-rank mode; a torn checkpoint is passed over;
 * K past the log is refused naming what it holds; restoreFromLog without a bound still replays the whole log.
 */
import { resolveModelSpec } from '../../trainer/training/model-store/resolve-model.ts';
import { mkdtempSync, rmSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { thetaAtIteration } from '../../trainer/training/export/theta-at-iteration.ts';
import { restoreFromLog } from '../../trainer/training/loop/restore.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import type { PerturbationMode } from '../../trainer/engine/engine.ts';
import { madeRun } from './helpers/made-run.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-theta-at-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe.each(['full', 'lowrank'] as PerturbationMode[])('θ at iteration K (%s mode)', (mode) => {
  const made = madeRun({ root: join(root, mode), run: `run-${mode}`, model: { preset: 'tiny', seed: 3 }, mode, updates: 4, checkpoints: [2, 3] });
  afterAll(async () => (await made).engine.close());

  it('every K from 0 to the latest gives the logged θ hash, from the nearest checkpoint at or below K', async () => {
    const { store, run, hashes } = await made;
    // checkpoint 3's weights torn: K = 3 and 4 fall back to checkpoint 2 and replay one more entry
    truncateSync(join(root, mode, ...keys.checkpointWeights(run, 3).split('/')), 100);
    expect(new Set(hashes).size).toBe(5);
    const expected = [
      { checkpoint: null, replayed: 0 },
      { checkpoint: null, replayed: 1 },
      { checkpoint: 2, replayed: 0 },
      { checkpoint: 2, replayed: 1 },
      { checkpoint: 2, replayed: 2 },
    ];
    for (let k = 0; k <= 4; k++) {
      const theta = await thetaAtIteration(store, run, k);
      expect({ k, hash: theta.thetaHash, checkpoint: theta.checkpoint, replayed: theta.replayed }).toEqual({ k, hash: hashes[k], ...expected[k] });
      expect(hashTheta(theta.model.weights)).toBe(hashes[k]);
    }
    const latest = await thetaAtIteration(store, run);
    expect([latest.iteration, latest.thetaHash]).toEqual([4, hashes[4]]);
  });

  it('K past the log, a bad K and a missing run are refused with what the store holds', async () => {
    const { store, run } = await made;
    await expect(thetaAtIteration(store, run, 5)).rejects.toThrow(`iteration 5 is beyond run ${run}'s log, which holds the updates of iterations 0…3 (θ_0 … θ_4)`);
    await expect(thetaAtIteration(store, run, -1)).rejects.toThrow('iteration must be an integer ≥ 0, got -1');
    await expect(thetaAtIteration(store, 'nope', 0)).rejects.toThrow('no run nope in the store');
  });

  it('a log entry whose θ hash does not match the replay is an error naming the iteration', async () => {
    const { store, run } = await made;
    const log = new TextDecoder().decode((await store.get(keys.log(run)))!).replace(/"thetaHashAfter":"([0-9a-f]+)"\}\n$/, '"thetaHashAfter":"0000"}\n');
    await store.put(keys.log('tampered'), new TextEncoder().encode(log));
    await store.put(keys.config('tampered'), (await store.get(keys.config(run)))!);
    await expect(thetaAtIteration(store, 'tampered', 4)).rejects.toThrow('replaying iteration 3 gave θ');
    // θ_3 does not need the tampered entry
    await expect(thetaAtIteration(store, 'tampered', 3)).resolves.toMatchObject({ iteration: 3 });
  });

  it('restoreFromLog without a bound replays the whole log into an engine (the trainer and replicas)', async () => {
    const { store, run, hashes, config } = await made;
    const engine = await createEngine({ model: await resolveModelSpec(config.model, undefined), mode });
    try {
      const restored = await restoreFromLog(store, run, engine, config.rank);
      expect([restored.next, hashTheta(engine.segments())]).toEqual([4, hashes[4]]);
    } finally {
      await engine.close();
    }
  });
});
