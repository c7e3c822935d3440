/**
 * Runs with `targets` through the ES loop, on the tiny preset's real engines and the fs store, rewards
 * written by a scripted fan-out (a fixed function of member and task, so every update moves θ): the
 * manifest and the log carry the targets, untargeted tensors keep θ_0's hash after every iteration, a run
 * stopped after an update record resumes on a fresh engine to the θ of an uninterrupted run (full and
 * low-rank mode) and so does the export's session-free replay, a replica following the store ends on the
 * trainer's θ (its members perturbing only the targeted tensors), and a pattern that names no tensor stops the run before anything is stored.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { IterationManifest, RunConfig, type RunConfigInput } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { loadEnvironment } from '../../environments/index.ts';
import type { EnvironmentDefinition } from '../../environments/environment.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { readLog } from '../../trainer/training/loop/checkpoints.ts';
import { restoreFromLog } from '../../trainer/training/loop/restore.ts';
import { startReplica } from '../../trainer/jobs/replica.ts';
import { thetaAtIteration } from '../../trainer/training/export/theta-at-iteration.ts';
import { buildRunArtifact } from '../../trainer/training/export/run-artifact.ts';
import { iterationGate, scriptedRunConfig, trainScripted } from './helpers/scripted-run.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-targets-run-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const configFor = (mode: 'full' | 'lowrank', targets: RunConfigInput['targets']) => scriptedRunConfig({ mode, rank: 2, targets });

let sudoku: EnvironmentDefinition;
beforeAll(async () => {
  sudoku = await loadEnvironment('sudoku');
});

/** One train() call on a fresh engine in `dir` (resuming whatever the store holds there). */
async function trainIn(dir: string, config: RunConfig, faults?: Parameters<typeof trainScripted>[0]['faults'], before?: (iteration: number) => Promise<void>) {
  const store = new FsObjectStore(join(root, dir));
  const engine = await createEngine({ model: config.model as { preset: 'tiny'; seed: number }, mode: config.mode });
  try {
    const result = await trainScripted({ store, config, engine, environment: sudoku, faults, before });
    return { result, segments: engine.segments().map((s) => ({ name: s.name, hash: hashTheta([s]) })), store };
  } finally {
    await engine.close();
  }
}

async function theta0(config: RunConfig) {
  const engine = await createEngine({ model: config.model as { preset: 'tiny'; seed: number }, mode: config.mode });
  try {
    return engine.segments().map((s) => ({ name: s.name, hash: hashTheta([s]) }));
  } finally {
    await engine.close();
  }
}

const json = async <T>(store: FsObjectStore, key: string, schema: { parse: (v: unknown) => T }) => schema.parse(JSON.parse(new TextDecoder().decode((await store.get(key))!)));

const cases: Array<[mode: 'full' | 'lowrank', targets: RunConfigInput['targets'], targeted: string[]]> = [
  ['full', { include: ['q_proj,v_proj'], exclude: ['layers\\.0\\.'] }, ['model.layers.1.self_attn.q_proj.weight', 'model.layers.1.self_attn.v_proj.weight']],
  ['lowrank', { include: 'all-linear', exclude: ['self_attn'] }, [0, 1].flatMap((l) => ['gate_proj', 'up_proj', 'down_proj'].map((p) => `model.layers.${l}.mlp.${p}.weight`))],
];

describe.each(cases)('%s mode', (mode, targets, targeted) => {
  const config = configFor(mode, targets);

  it('records the targets, leaves untargeted tensors at θ_0, and resumes to the same θ', async () => {
    const whole = await trainIn(`${mode}-whole`, config);
    const start = await theta0(config);
    for (const [i, s] of whole.segments.entries()) {
      if (targeted.includes(s.name)) expect(s.hash, s.name).not.toBe(start[i].hash);
      else expect(s.hash, s.name).toBe(start[i].hash);
    }
    for (let k = 0; k < config.iterations; k++) expect((await json(whole.store, keys.manifest('r', k), IterationManifest)).targets).toEqual(config.targets);
    const log = await readLog(whole.store, 'r');
    expect(log.map((e) => e.targets)).toEqual([config.targets, config.targets, config.targets]);
    expect(new Set(log.map((e) => e.thetaHashAfter)).size).toBe(3);

    // stopped after iteration 1's update record (its log entry unwritten), resumed in a new engine
    const stop = new Error('stop');
    await expect(trainIn(`${mode}-stopped`, config, (p, k) => { if (p === 'after-update-record' && k === 1) throw stop; })).rejects.toBe(stop);
    const resumed = await trainIn(`${mode}-stopped`, config);
    expect(resumed.result.resumedAt).toBe(2);
    expect(resumed.result.thetaHash).toBe(whole.result.thetaHash);

    // the export's replay (no onnxruntime session) applies the same targeted updates from θ_0
    for (const k of [1, 3]) expect((await thetaAtIteration(whole.store, 'r', k)).thetaHash).toBe(log[k - 1].thetaHashAfter);
    // the portable artifact marks the tensors the updates touch (the reference replay in C applies them)
    const { artifact } = await buildRunArtifact(whole.store, 'r');
    expect(artifact.layout.tensors.filter((t) => t.updated).map((t) => t.name)).toEqual(targeted);

    // θ rebuilt as a replica or an export would: from the checkpoint at 2 and the log, then from θ_0 and the log
    for (const [gone, from] of [[3, 2], [2, null]] as const) {
      await whole.store.delete(keys.checkpointMeta('r', gone));
      const engine = await createEngine({ model: config.model as { preset: 'tiny'; seed: number }, mode });
      try {
        const restored = await restoreFromLog(whole.store, 'r', engine, config.rank);
        expect(restored).toMatchObject({ next: 3, checkpoint: from, replayed: from === null ? 3 : 1 });
        expect(hashTheta(engine.segments())).toBe(whole.result.thetaHash);
      } finally {
        await engine.close();
      }
    }
  }, 60_000);
});

describe('with a replica, and with a bad pattern', () => {
  it('a replica following the run ends on the trainer\'s θ', async () => {
    const config = configFor('full', { include: 'all-linear', exclude: ['mlp'] });
    const store = new FsObjectStore(join(root, 'replica'));
    // While the replica serves iteration 1, one of its members decodes: θ as it decodes (full mode
    // perturbs θ in place) differs from θ_1 in the targeted tensors only.
    const holder: { replica?: Awaited<ReturnType<typeof startReplica>> } = {};
    let probe: Promise<{ moved: string[] }> | undefined;
    const gate = iterationGate(1);
    const starting = startReplica({
      store, run: 'r', id: 'replica-a', pollMs: 10,
      onProgress: (e) => {
        if (e.kind !== 'serving' || e.iteration !== 1 || probe) return;
        const engine = holder.replica!.served.engine;
        const before = engine.segments().map((s) => hashTheta([s]));
        let during: string[] | undefined;
        const snapshot = () => void (during ??= engine.segments().map((s) => hashTheta([s])));
        probe = engine
          .generate([{ promptIds: [256, 72, 105], member: { kind: 'member', iteration: 1, index: 1 }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 4, stop: [], ignoreEos: true, onText: snapshot }])
          .then(() => ({ moved: engine.segments().filter((_, i) => during![i] !== before[i]).map((s) => s.name) }));
        gate.open();
      },
    });
    void starting.then((r) => (holder.replica = r));
    const { result } = await trainIn('replica', config, undefined, gate.before);
    const replica = await starting;
    try {
      expect(await replica.done).toEqual({ iterations: 3, thetaHash: result.thetaHash });
      expect((await probe!).moved).toEqual(replica.served.engine.targetTensors(config.targets));
      expect((await probe!).moved).toHaveLength(8);
    } finally {
      await replica.stop();
    }
    const all = await trainIn('replica-all', configFor('full', 'all'));
    expect(all.result.thetaHash).not.toBe(result.thetaHash);
  }, 60_000);

  it('a pattern that names no tensor stops the run before anything is stored', async () => {
    const config = configFor('full', { include: ['q_proj', 'qproj'] });
    await expect(trainIn('bad', config)).rejects.toThrow(/targets\.include\[1\]: "qproj" matches none of full mode's tensors: model\.embed_tokens\.weight/);
    expect(await new FsObjectStore(join(root, 'bad')).get(keys.config('r'))).toBeNull();
  });
});
