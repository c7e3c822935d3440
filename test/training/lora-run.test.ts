/**
 * A LoRA-ES run through the ES loop, on the tiny preset's real engines and the fs store, rewards written by
 * a scripted fan-out (a fixed function of member and task, so every update moves θ): θ, the checkpoints and
 * the θ hashes are the adapters only while the base weights keep their hash; a run stopped after an update
 * record resumes on a fresh engine to the uninterrupted run's θ bit for bit, and θ rebuilt from a checkpoint
 * and the log is that θ too; a replica following the run (trainer/jobs) serves the members' tokens an
 * engine at the same θ serves, and ends on the trainer's θ.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { CheckpointMeta, IterationManifest } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { loadEnvironment } from '../../environments/index.ts';
import type { EnvironmentDefinition } from '../../environments/environment.ts';
import type { Engine, GenerateRow } from '../../trainer/engine/engine.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { loraMatrices } from '../../trainer/engine/model/lora-matrices.ts';
import { openModel } from '../../trainer/engine/model/open-model.ts';
import { readLog } from '../../trainer/training/loop/checkpoints.ts';
import { restoreFromLog } from '../../trainer/training/loop/restore.ts';
import { startReplica } from '../../trainer/jobs/replica.ts';
import { iterationGate, scriptedRunConfig, trainScripted } from './helpers/scripted-run.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-lora-run-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const config = scriptedRunConfig({
  mode: 'lora',
  lora: { rank: 4, alpha: 8, targets: { include: 'all-linear', exclude: ['mlp'] } },
  es: { population: 4, sigma: 0.3, alpha: { schedule: 'cosine', initial: 0.2, final: 0.05 }, weightDecay: 0.1 },
});
const spec = config.model as { preset: 'tiny'; seed: number };

let sudoku: EnvironmentDefinition;
beforeAll(async () => {
  sudoku = await loadEnvironment('sudoku');
});

/** A lora engine of the run's model, with the model it holds (its base weights). */
async function loraEngine() {
  const model = openModel(spec);
  const engine = await createOnnxEngine(model, { model: spec, mode: 'lora', lora: { ...config.lora!, seed: config.seed } });
  return { engine, model };
}

/** One train() call on a fresh engine in `dir` (resuming whatever the store holds there). */
async function trainIn(dir: string, faults?: Parameters<typeof trainScripted>[0]['faults'], before?: (iteration: number) => Promise<void>) {
  const store = new FsObjectStore(join(root, dir));
  const { engine, model } = await loraEngine();
  const baseHash = hashTheta(model.weights);
  try {
    const result = await trainScripted({ store, config, engine, environment: sudoku, faults, before });
    return { result, store, baseUnchanged: hashTheta(model.weights) === baseHash };
  } finally {
    await engine.close();
  }
}

const json = async <T>(store: FsObjectStore, key: string, schema: { parse: (v: unknown) => T }) => schema.parse(JSON.parse(new TextDecoder().decode((await store.get(key))!)));
const greedy = (member: GenerateRow['member']): GenerateRow => ({ promptIds: [256, 72, 105, 33], member, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 8, stop: [], ignoreEos: true });

describe('a lora run', () => {
  it('updates and checkpoints the adapters only, and resumes to the same θ', async () => {
    const whole = await trainIn('whole');
    expect(whole.baseUnchanged).toBe(true);
    const { layout } = loraMatrices(openModel(spec), config.lora!);
    expect(layout.slots).toHaveLength(8); // q, k, v, o of two layers
    const log = await readLog(whole.store, 'r');
    expect(new Set(log.map((e) => e.thetaHashAfter)).size).toBe(3);
    const manifest = await json(whole.store, keys.manifest('r', 1), IterationManifest);
    expect(manifest).toMatchObject({ mode: 'lora', rank: 4, lora: config.lora });
    const meta = await json(whole.store, keys.checkpointMeta('r', 3), CheckpointMeta);
    expect(meta).toMatchObject({ params: layout.length, bytes: layout.length * 4, thetaHash: whole.result.thetaHash });

    // stopped after iteration 1's update record (its log entry unwritten), resumed in a new engine
    const stop = new Error('stop');
    await expect(trainIn('stopped', (p, k) => { if (p === 'after-update-record' && k === 1) throw stop; })).rejects.toBe(stop);
    const resumed = await trainIn('stopped');
    expect(resumed.result.resumedAt).toBe(2);
    expect(resumed.result.thetaHash).toBe(whole.result.thetaHash);

    // θ from the checkpoint at 2 and the log, then from θ_0 and the log
    for (const [gone, from] of [[3, 2], [2, null]] as const) {
      await whole.store.delete(keys.checkpointMeta('r', gone));
      const { engine } = await loraEngine();
      try {
        expect(await restoreFromLog(whole.store, 'r', engine, config.rank)).toMatchObject({ next: 3, checkpoint: from, replayed: from === null ? 3 : 1 });
        expect(hashTheta(engine.segments())).toBe(whole.result.thetaHash);
      } finally {
        await engine.close();
      }
    }
  }, 60_000);

  it('a replica following it serves the tokens an engine at the same θ serves, and ends on the trainer\'s θ', async () => {
    const store = new FsObjectStore(join(root, 'replica'));
    const holder: { replica?: Awaited<ReturnType<typeof startReplica>> } = {};
    let served: Promise<number[][]> | undefined;
    const rows = [greedy({ kind: 'base' }), ...[0, 1, 2, 3].map((index) => greedy({ kind: 'member', iteration: 1, index }))];
    const gate = iterationGate(1);
    const starting = startReplica({
      store, run: 'r', id: 'replica-a', pollMs: 10,
      onProgress: (e) => {
        if (e.kind !== 'serving' || e.iteration !== 1 || served) return;
        served = holder.replica!.served.engine.generate(rows).then((out) => out.map((r) => r.tokenIds));
        gate.open();
      },
    });
    void starting.then((r) => (holder.replica = r));
    const { result } = await trainIn('replica', undefined, gate.before);
    const replica = await starting;
    try {
      expect(await replica.done).toEqual({ iterations: 3, thetaHash: result.thetaHash });
    } finally {
      await replica.stop();
    }
    // an engine at θ_1 from the store, serving iteration 1's population as its manifest names it
    const { engine } = await loraEngine();
    let own: number[][];
    try {
      await restoreFromLog(store, 'r', engine as Engine, config.rank, 1);
      const m = await json(store, keys.manifest('r', 1), IterationManifest);
      expect(hashTheta(engine.segments())).toBe(m.thetaHash);
      engine.setPopulation({ runSeed: m.runSeed, iteration: 1, sigma: m.sigma, rank: m.rank, members: m.members });
      own = (await engine.generate(rows)).map((r) => r.tokenIds);
    } finally {
      await engine.close();
    }
    expect(served).toBeDefined();
    expect(await served!).toEqual(own);
    // the members decode differently, so the comparison could fail
    expect(new Set(own.map((t) => JSON.stringify(t))).size).toBeGreaterThan(2);
  }, 60_000);
});
