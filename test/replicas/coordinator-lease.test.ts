/**
 * The coordinator's lease (trainer/training/loop/coordinator-lease.ts) with two contenders over one fs store: one
 * wins a race, the other is refused naming the holder; a released or expired lease is taken over by the next
 * epoch, and the replaced holder's next check stops it; and a run with replicas refuses to start while
 * another trainer holds the run's lease.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { RunConfig } from '../../shared/schemas/index.ts';
import { acquireCoordinatorLease, CoordinatorConflictError } from '../../trainer/training/loop/coordinator-lease.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { silentProgress } from '../../trainer/training/loop/progress.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-lease-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the coordinator lease', () => {
  it('two contenders racing for a run: exactly one coordinates, the other is told who', async () => {
    for (let round = 0; round < 5; round++) {
      const store = new FsObjectStore(join(root, `race-${round}`));
      const results = await Promise.allSettled(['box-a', 'box-b'].map((holder) => acquireCoordinatorLease(store, 'r', { ttlMs: 60_000, renewMs: 0, holder })));
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      expect(lost[0].reason).toBeInstanceOf(CoordinatorConflictError);
      expect(lost[0].reason.message).toMatch(/^run r is coordinated by box-[ab] /);
      await (won[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof acquireCoordinatorLease>>>).value.release();
    }
  });

  it('a held lease refuses, a released one passes to the next epoch, and an expired holder is stopped at its next check', async () => {
    const store = new FsObjectStore(join(root, 'epochs'));
    const a = await acquireCoordinatorLease(store, 'r', { ttlMs: 60_000, renewMs: 0, holder: 'box-a' });
    await expect(acquireCoordinatorLease(store, 'r', { ttlMs: 60_000, holder: 'box-b' })).rejects.toThrow(/run r is coordinated by box-a \(lease epoch 0, until .*\): stop that trainer, or wait for its lease to expire/);
    await a.check();
    await a.release();
    const b = await acquireCoordinatorLease(store, 'r', { ttlMs: 80, renewMs: 0, holder: 'box-b' });
    expect(b.epoch).toBe(1);
    // box-b stalls past its expiry without renewing: box-a takes epoch 2, and box-b's next check stops it.
    await sleep(120);
    const again = await acquireCoordinatorLease(store, 'r', { ttlMs: 60_000, renewMs: 0, holder: 'box-a' });
    expect(again.epoch).toBe(2);
    await expect(b.check()).rejects.toThrow(/run r: this trainer's coordinator lease \(epoch 1\) was taken over by box-a \(lease epoch 2/);
    await again.check();
    expect((await store.list(keys.coordinatorLeases('r'))).sort()).toEqual([0, 1, 2].map((e) => keys.coordinatorLease('r', e)));
    await again.release();
  });

  it('a renewed lease outlives its ttl', async () => {
    const store = new FsObjectStore(join(root, 'renew'));
    const a = await acquireCoordinatorLease(store, 'r', { ttlMs: 1_000, renewMs: 50, holder: 'box-a' });
    await sleep(1_500);
    await expect(acquireCoordinatorLease(store, 'r', { ttlMs: 1_000, holder: 'box-b' })).rejects.toThrow(/coordinated by box-a/);
    await a.release();
  });

  it('a run with replicas does not start while another trainer coordinates it', async () => {
    const dir = join(root, 'run');
    const held = await acquireCoordinatorLease(new FsObjectStore(dir), 'r', { ttlMs: 60_000, renewMs: 0, holder: 'other-box' });
    const config = RunConfig.parse({
      environment: { name: 'sudoku', options: { size: 4, blanks: 2 } },
      tasks: { seed: 1, trainPerIteration: 1, evalCount: 1 },
      model: { preset: 'tiny', seed: 0 },
      es: { population: 2, sigma: 0.02, alpha: 0.01 },
      iterations: 1,
      workers: 1,
      deadlineMs: 30_000,
    });
    await expect(runEmbedded({ config, run: 'r', storeRoot: dir, progress: silentProgress, replicas: { syncTimeoutMs: 100 } })).rejects.toThrow(/run r is coordinated by other-box/);
    expect(await new FsObjectStore(dir).get(keys.manifest('r', 0))).toBeNull();
    await held.release();
  });
});
