/**
 * A full-mode run on the CPU with `noise: 'esopt-device-noise'` (the tiny preset's real engine, the fs store,
 * rewards from a scripted fan-out): manifests and log entries name the definition, θ_K is θ_0 plus the
 * logged coefficients times the device stream's ε (recomputed here from shared/device-noise.ts alone), a run
 * stopped after an update record resumes to the same θ, a checkpoint plus the log and the session-free
 * replay reach it too, the run artifact names the definition, and the same run on the default noise ends
 * elsewhere with no `noise` in its manifests or log. A replica following such a run ends on the trainer's θ,
 * its members drawn from the device stream. The perturbation pool's workers make the device stream, and a
 * low-rank engine refuses a population or update on it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyDeviceNoise } from '../../shared/device-noise.ts';
import { keys } from '../../shared/keys.ts';
import { IterationManifest, RunConfig } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { loadEnvironment } from '../../environments/index.ts';
import type { EnvironmentDefinition } from '../../environments/environment.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { readLog } from '../../trainer/training/loop/checkpoints.ts';
import { restoreFromLog } from '../../trainer/training/loop/restore.ts';
import { coefficientsOf } from '../../trainer/training/loop/weight-update.ts';
import { thetaAtIteration } from '../../trainer/training/export/theta-at-iteration.ts';
import { buildRunArtifact } from '../../trainer/training/export/run-artifact.ts';
import { perturbWith } from '../../trainer/engine/perturbation/exact-perturbation.ts';
import { PerturbationPool } from '../../trainer/engine/perturbation/perturbation-pool.ts';
import { startReplica } from '../../trainer/jobs/replica.ts';
import { iterationGate, scriptedRunConfig, trainScripted } from './helpers/scripted-run.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-device-noise-run-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const configFor = (noise?: 'esopt-device-noise') => scriptedRunConfig({ mode: 'full', ...(noise ? { noise } : {}) });

let sudoku: EnvironmentDefinition;
beforeAll(async () => {
  sudoku = await loadEnvironment('sudoku');
});

const model = { preset: 'tiny', seed: 2 } as const;

async function trainIn(dir: string, config: RunConfig, faults?: Parameters<typeof trainScripted>[0]['faults'], before?: (iteration: number) => Promise<void>) {
  const store = new FsObjectStore(join(root, dir));
  const engine = await createEngine({ model, mode: 'full' });
  try {
    const result = await trainScripted({ store, config, engine, environment: sudoku, faults, before });
    return { result, store, theta: engine.segments().map((s) => s.data.slice()) };
  } finally {
    await engine.close();
  }
}

const text = async (store: FsObjectStore, key: string) => new TextDecoder().decode((await store.get(key))!);

describe("a full-mode run on 'esopt-device-noise'", () => {
  it('trains on the device stream, resumes, restores and replays to the same θ', async () => {
    const config = configFor('esopt-device-noise');
    const whole = await trainIn('device-whole', config);
    for (let k = 0; k < 3; k++) expect(IterationManifest.parse(JSON.parse(await text(whole.store, keys.manifest('r', k)))).noise).toBe('esopt-device-noise');
    const log = await readLog(whole.store, 'r');
    expect(log.map((e) => e.noise)).toEqual(['esopt-device-noise', 'esopt-device-noise', 'esopt-device-noise']);

    // θ_3 from θ_0 and the logged coefficients, ε from shared/device-noise.ts alone (applyDenseUpdate's order: noise index)
    const engine = await createEngine({ model, mode: 'full' });
    const segments = engine.segments().map((s) => ({ ...s, data: s.data.slice() }));
    await engine.close();
    for (const entry of log) {
      const coefs = [...coefficientsOf(entry)].sort((a, b) => a.noiseIndex - b.noiseIndex);
      for (const s of segments) {
        const acc = new Float64Array(s.data.length);
        for (const { noiseIndex, coef } of coefs) applyDeviceNoise(acc, { runSeed: entry.runSeed, iteration: entry.iteration, member: noiseIndex }, coef, s.offset, 0, acc.length);
        const keep = 1 - entry.alpha * entry.weightDecay;
        for (let i = 0; i < acc.length; i++) s.data[i] = s.data[i] * keep + acc[i];
      }
      expect(hashTheta(segments)).toBe(entry.thetaHashAfter);
    }
    expect(hashTheta(segments)).toBe(whole.result.thetaHash);

    // stopped after iteration 1's update record, resumed on a fresh engine
    const stop = new Error('stop');
    await expect(trainIn('device-stopped', config, (p, k) => { if (p === 'after-update-record' && k === 1) throw stop; })).rejects.toBe(stop);
    const resumed = await trainIn('device-stopped', config);
    expect(resumed.result.resumedAt).toBe(2);
    expect(resumed.result.thetaHash).toBe(whole.result.thetaHash);
    expect((await readLog(resumed.store, 'r')).map((e) => e.thetaHashAfter)).toEqual(log.map((e) => e.thetaHashAfter));

    // the checkpoint at 2 plus the log; the session-free replay from θ_0
    await whole.store.delete(keys.checkpointMeta('r', 3));
    const restoring = await createEngine({ model, mode: 'full' });
    try {
      expect(await restoreFromLog(whole.store, 'r', restoring, config.rank)).toMatchObject({ next: 3, checkpoint: 2, replayed: 1 });
      expect(hashTheta(restoring.segments())).toBe(whole.result.thetaHash);
    } finally {
      await restoring.close();
    }
    expect((await thetaAtIteration(whole.store, 'r', 3)).thetaHash).toBe(whole.result.thetaHash);
    expect((await buildRunArtifact(whole.store, 'r')).artifact.noise).toEqual({ id: 'esopt-device-noise', version: 1 });

    // the default noise: another θ, and manifests and log entries without the field
    const plain = await trainIn('plain', configFor());
    expect(plain.result.thetaHash).not.toBe(whole.result.thetaHash);
    expect(await text(plain.store, keys.manifest('r', 0))).not.toContain('"noise"');
    expect(await text(plain.store, keys.log('r'))).not.toContain('"noise"');
    expect((await buildRunArtifact(plain.store, 'r')).artifact.noise).toEqual({ id: 'esopt-noise', version: 1 });
  }, 60_000);

  it("a replica following the run serves members on the device noise and ends on the trainer's θ", async () => {
    const config = configFor('esopt-device-noise');
    const store = new FsObjectStore(join(root, 'replica'));
    // While the replica serves iteration 1, member 1 (noise 0, sign −1) decodes: θ as it decodes is θ_1
    // perturbed exactly with −σ·ε of the device stream.
    const holder: { replica?: Awaited<ReturnType<typeof startReplica>> } = {};
    let probe: Promise<{ during: string; want: string }> | undefined;
    const gate = iterationGate(1);
    const starting = startReplica({
      store, run: 'r', id: 'replica-a', pollMs: 10,
      onProgress: (e) => {
        if (e.kind !== 'serving' || e.iteration !== 1 || probe) return;
        const engine = holder.replica!.served.engine;
        const theta1 = engine.segments().map((s) => ({ ...s, data: s.data.slice() }));
        perturbWith('js', theta1, { runSeed: 11, iteration: 1, member: 0, definition: 'esopt-device-noise' }, -0.05);
        let during: string | undefined;
        probe = engine
          .generate([{ promptIds: [256, 72, 105], member: { kind: 'member', iteration: 1, index: 1 }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 2, stop: [], ignoreEos: true, onText: () => void (during ??= hashTheta(engine.segments())) }])
          .then(() => ({ during: during!, want: hashTheta(theta1) }));
        gate.open();
      },
    });
    void starting.then((r) => (holder.replica = r));
    const { result } = await trainIn('replica', config, undefined, gate.before);
    const replica = await starting;
    try {
      expect(await replica.done).toEqual({ iterations: 3, thetaHash: result.thetaHash });
      const { during, want } = await probe!;
      expect(during).toBe(want);
    } finally {
      await replica.stop();
    }
  }, 60_000);

  it('a low-rank engine refuses a population or an update on the device noise', async () => {
    const engine = await createEngine({ model, mode: 'lowrank' });
    try {
      expect(() => engine.setPopulation({ runSeed: 1, iteration: 0, sigma: 0.1, rank: 1, noise: 'esopt-device-noise', members: [] })).toThrow(/noise "esopt-device-noise" is for full mode; this engine runs lowrank mode/);
      expect(() => engine.applyUpdate({ runSeed: 1, iteration: 0, coefficients: [], rank: 1, noise: 'esopt-device-noise' })).toThrow(/is for full mode/);
    } finally {
      await engine.close();
    }
  });

  it("the perturbation pool's workers perturb with the device stream", async () => {
    const pool = await PerturbationPool.create(2);
    try {
      const theta = () => [0, 1, 2].map((t) => ({ name: `t${t}`, data: Float32Array.from({ length: 5000 + t }, (_, i) => Math.sin(i + t) * 0.1), offset: t * 6000 }));
      const key = { runSeed: 4, iteration: 1, member: 2, definition: 'esopt-device-noise' as const };
      const here = theta();
      perturbWith('js', here, key, 0.02);
      const pooled = theta();
      await pool.perturb(pooled, key, 0.02);
      expect(pooled.map((s) => s.data)).toEqual(here.map((s) => s.data));
      const plain = theta();
      await pool.perturb(plain, { runSeed: 4, iteration: 1, member: 2 }, 0.02);
      expect(plain[0].data).not.toEqual(here[0].data);
    } finally {
      await pool.close();
    }
  });
});
