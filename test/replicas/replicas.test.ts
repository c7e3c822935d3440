/**
 * Trainer replicas on loopback with the fs store and the demo's agent (real engines, real servers, the
 * local worker pool): a run whose members are served by the coordinator and a replica trains bit for bit
 * like a run without replicas, in full and low-rank mode; the replica ends on the same θ; a replica
 * killed mid-iteration costs nothing (its episodes fail over); a late joiner catches up from the
 * checkpoint and the log; and a replica holding another θ stops the run with its name.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { costOfEpisodes, costOfEpisodesWithReplicas } from '../../shared/cost.ts';
import { keys } from '../../shared/keys.ts';
import { IterationManifest, RunConfig, UpdateRecord } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import type { FaultHook } from '../../trainer/training/loop/fault-points.ts';
import { silentProgress } from '../../trainer/training/loop/progress.ts';
import { endpointOf, routeMembers } from '../../trainer/training/loop/replica-set.ts';
import { startReplica, type RunningReplica } from '../../trainer/jobs/replica.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-replicas-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const configFor = (mode: 'full' | 'lowrank') =>
  RunConfig.parse({
    environment: { name: 'sudoku', options: { size: 4, blanks: 4, invalidMove: 'waste', observation: 'next-cell', constrainActions: true, shapedReward: true } },
    tasks: { seed: 3, trainPerIteration: 2, evalCount: 2 },
    model: { dir: 'models/sudoku-4x4-demo' },
    mode,
    rank: 2,
    // Schedules: each iteration's σ reaches the replicas through its manifest, α through the log.
    es: { population: 4, sigma: { schedule: 'linear', initial: 0.05, final: 0.07 }, alpha: { schedule: 'step', initial: 0.05, factor: 0.5, every: 1 } },
    generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 12 },
    iterations: 3,
    evalInterval: 3,
    checkpointInterval: 2,
    workers: 2,
    deadlineMs: 60_000,
    seed: 9,
  });

async function trainIn(dir: string, config: RunConfig, o: { replicas?: boolean; faults?: FaultHook; syncTimeoutMs?: number } = {}) {
  const { result } = await runEmbedded({
    config,
    run: 'r',
    storeRoot: join(root, dir),
    progress: silentProgress,
    pollMs: 20,
    faults: o.faults,
    ...(o.replicas ? { replicas: { syncTimeoutMs: o.syncTimeoutMs ?? 30_000 } } : {}),
  });
  const store = new FsObjectStore(join(root, dir));
  const updates = [];
  const manifests = [];
  for (let k = 0; k < config.iterations; k++) {
    updates.push(UpdateRecord.parse(JSON.parse(new TextDecoder().decode((await store.get(keys.update('r', k)))!))));
    manifests.push(IterationManifest.parse(JSON.parse(new TextDecoder().decode((await store.get(keys.manifest('r', k)))!))));
  }
  return { result, updates, manifests, store };
}

/** A run without replicas, once per mode: the full-mode reference serves both describes below. */
const references = new Map<string, ReturnType<typeof trainIn>>();
function referenceRun(mode: 'full' | 'lowrank') {
  if (!references.has(mode)) references.set(mode, trainIn(`${mode}-one`, configFor(mode)));
  return references.get(mode)!;
}

/** Two or three real runs a test: the 60 s default leaves too little room on two shared, loaded cores. */
const RUNS_TIMEOUT_MS = 120_000;

const replicaIn = (dir: string, id: string) => startReplica({ store: new FsObjectStore(join(root, dir)), run: 'r', id, pollMs: 20 });

describe.each(['full', 'lowrank'] as const)('%s mode', (mode) => {
  const config = configFor(mode);

  it('two replicas train bit-identically to one, and a late joiner catches up', async () => {
    const reference = await referenceRun(mode);
    expect(new Set(reference.updates.map((u) => u.thetaHashAfter)).size).toBe(config.iterations); // θ moves every iteration
    expect(reference.manifests.map((m) => Number(m.sigma.toFixed(12)))).toEqual([0.05, 0.06, 0.07]);

    // A replica waits for the run's config, so it starts before or after the trainer alike.
    const starting = replicaIn(`${mode}-two`, 'replica-a');
    const two = await trainIn(`${mode}-two`, config, { replicas: true });
    const replica = await starting;
    const followed = await replica.done;
    await replica.stop();

    expect(two.result.thetaHash).toBe(reference.result.thetaHash);
    expect(two.updates).toEqual(reference.updates);
    expect(followed).toEqual({ iterations: config.iterations, thetaHash: reference.result.thetaHash });
    // From iteration 1 on (it reports θ_0 while the coordinator plans iteration 0), half the members were routed to the replica.
    for (const m of two.manifests.slice(1)) {
      expect(m.routing?.replicas.map((r) => r.id)).toEqual(['coordinator', 'replica-a']);
      expect(m.routing?.routes.filter((r) => r.replica === 1)).toHaveLength(config.es.population / 2);
    }

    const late = await replicaIn(`${mode}-two`, 'replica-late');
    expect(await late.done).toEqual({ iterations: config.iterations, thetaHash: reference.result.thetaHash });
    await late.stop();
  }, RUNS_TIMEOUT_MS);
});

describe('replica failures', () => {
  const config = configFor('full');

  it('a replica killed mid-iteration: its episodes fail over and the run matches the reference', async () => {
    const reference = await referenceRun('full');
    const replica = replicaIn('kill-two', 'replica-doomed');
    let killed = false;
    const faults: FaultHook = async (point, k) => {
      if (point === 'after-fanout' && k === 1 && !killed) {
        killed = true;
        await (await replica).stop();
      }
    };
    const { result, updates, manifests } = await trainIn('kill-two', config, { replicas: true, faults, syncTimeoutMs: 2_000 });
    expect(killed).toBe(true);
    expect(manifests[1].routing?.replicas.map((r) => r.id)).toEqual(['coordinator', 'replica-doomed']);
    // Lost after iteration 1: iteration 2 is the coordinator's alone.
    expect(manifests[2].routing?.replicas.map((r) => r.id)).toEqual(['coordinator']);
    expect(result.thetaHash).toBe(reference.result.thetaHash);
    expect(updates.map((u) => u.counted.length)).toEqual(reference.updates.map((u) => u.counted.length));
    expect(updates).toEqual(reference.updates);
  }, RUNS_TIMEOUT_MS);

  it('a replica holding another θ stops the run, naming it', async () => {
    const holder: { replica?: RunningReplica } = {};
    const starting = startReplica({
      store: new FsObjectStore(join(root, 'bad')),
      run: 'r',
      id: 'replica-bad',
      pollMs: 20,
      // Once it has reported θ_0 and serves iteration 0, its θ drifts by one float: its θ_1 cannot match.
      onProgress: (e) => {
        if (e.kind === 'serving' && e.iteration === 0) holder.replica!.served.engine.segments()[0].data[0] += 1;
      },
    });
    void starting.then((r) => (holder.replica = r));
    try {
      await expect(trainIn('bad', config, { replicas: true })).rejects.toThrow(/replicas disagree on θ before iteration 1: .*replica-bad has [0-9a-f]+/);
    } finally {
      await (await starting).stop();
    }
  });
});

describe('routeMembers', () => {
  const replicas = [
    { id: 'coordinator', baseUrl: 'http://127.0.0.1:1/v1' },
    { id: 'b', baseUrl: 'http://127.0.0.1:2/v1' },
    { id: 'c', baseUrl: 'http://127.0.0.1:3/v1' },
  ];
  it('keeps antithetic twins together and deals the pairs round-robin', () => {
    const members = [0, 1, 2, 3, 4, 5, 6, 7].map((index) => ({ index, noiseIndex: index >> 1, sign: (index % 2 ? -1 : 1) as 1 | -1 }));
    const routing = routeMembers(members, replicas);
    expect(routing.routes.map((r) => r.replica)).toEqual([0, 0, 1, 1, 2, 2, 0, 0]);
    expect(endpointOf(routing, 2)).toEqual({ baseUrl: 'http://127.0.0.1:2/v1', fallbackUrls: ['http://127.0.0.1:1/v1', 'http://127.0.0.1:3/v1'] });
    expect(() => endpointOf(routing, 9)).toThrow(/member 9 has no route/);
  });
  it('with the coordinator alone, every member is its own', () => {
    const members = [0, 1, 2].map((index) => ({ index, noiseIndex: index, sign: 1 as const }));
    expect(routeMembers(members, replicas.slice(0, 1)).routes.every((r) => r.replica === 0)).toBe(true);
  });
});

describe('cost with replicas', () => {
  const usage = { durationMs: 15_000, memoryMb: 1024, completionTokens: 120, episodesPerInvocation: 1 };
  const prices = measuredPrices();
  it('R replicas at perfect scaling cost what one box does; below it, the GPU share grows by R ÷ scaling', () => {
    const one = costOfEpisodes(1000, usage, prices);
    expect(costOfEpisodesWithReplicas(1000, usage, 2, 2, prices)).toEqual(one);
    const half = costOfEpisodesWithReplicas(1000, usage, 2, 1.6, prices);
    expect(half.gpuSeconds).toBeCloseTo((one.gpuSeconds * 2) / 1.6, 9);
    expect(half.lambdaGbSeconds).toBe(one.lambdaGbSeconds);
    expect(half.usd).toBeGreaterThan(one.usd);
    expect(() => costOfEpisodesWithReplicas(1000, usage, 2, 2.5, prices)).toThrow(/scaling must be in \(0, 2\]/);
    expect(() => costOfEpisodesWithReplicas(1000, usage, 0, 1, prices)).toThrow(/replicas must be a whole number/);
  });
});
