/**
 * Episodes/s served by 1 and by 2 trainer replicas at the same episode load. Each replica is an
 * `esopt replica` process pinned to its own core (taskset), serving a live population of a run staged in
 * a scratch store (config + iteration 0's manifest, so every replica perturbs the same θ_0); the load is
 * the same episodes played by this process with the same concurrency, members routed as the trainer
 * routes them. Interleaved rounds, so machine drift hits both counts alike.
 */
import { esAt } from '../../../shared/schedule.ts';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { spawnEsopt } from '../../assembly/esopt-process.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { costOfEpisodes, costOfEpisodesWithReplicas } from '../../../shared/cost.ts';
import { ask } from '../../../shared/es.ts';
import { keys } from '../../../shared/keys.ts';
import { readJson } from '../../../shared/store/json.ts';
import { IterationManifest, ReplicaAnnouncement, RunConfig } from '../../../shared/schemas/index.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import { loadEnvironment } from '../../../environments/index.ts';
import { runEpisode } from '../../../environments/episode-runner.ts';
import { HttpPolicy } from '../../../environments/policies/http-client.ts';
import { openEngine } from '../../assembly/engine.ts';
import { storeAt } from '../../assembly/stores.ts';
import { resolveModelSpec } from '../../training/model-store/resolve-model.ts';
import { endpointOf, routeMembers } from '../../training/loop/index.ts';
import { memberModelName } from '../../serving/model-name.ts';
import type { Log } from './benchmark.ts';
import { machineInfo, median } from './measure.ts';
import { int, ModelSpecOption } from './options.ts';
import { measuredPrices } from '../../fanout/measured-prices.ts';


export interface ReplicasBenchOptions {
  config: RunConfig;
  /** Episodes per measurement. */
  episodes: number;
  /** Episodes in flight at once. */
  concurrency: number;
  rounds: number;
}

export interface ReplicasBenchResult {
  episodes_per_s_1: number;
  episodes_per_s_2: number;
  /** episodes/s with 2 replicas ÷ with 1, medians over rounds. */
  scaling: number;
  pinned: boolean;
  /** The cost model's price of 1,000 such episodes on Lambda (1 GB) with 1 and with 2 replicas at the measured scaling. */
  usd_per_1000_episodes_1: number;
  usd_per_1000_episodes_2: number;
  rounds: Array<{ replicas: number; episodes_per_s: number }>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function benchReplicas(o: ReplicasBenchOptions, log: Log): Promise<ReplicasBenchResult> {
  const root = mkdtempSync(join(tmpdir(), 'esopt-bench-replicas-'));
  const store = storeAt(root);
  const run = 'bench';
  const pinned = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
  const children: ChildProcess[] = [];
  try {
    const engine = await openEngine({ model: await resolveModelSpec(o.config.model, store), mode: o.config.mode });
    const thetaHash = hashTheta(engine.segments());
    await engine.close();
    const members = ask(o.config.es);
    const environment = await loadEnvironment(o.config.environment.name);
    const options = environment.optionsSchema.parse(o.config.environment.options);
    const tasks = environment.sampleTasks('train', o.episodes, o.config.tasks.seed, options);
    const now = new Date();
    await store.put(keys.config(run), JSON.stringify(o.config));
    await store.put(
      keys.manifest(run, 0),
      JSON.stringify(
        IterationManifest.parse({
          run, iteration: 0, runSeed: o.config.seed, thetaHash, sigma: esAt(o.config.es, 0, o.config.iterations).sigma, mode: o.config.mode, rank: o.config.rank, members,
          tasks: tasks.map((t) => ({ id: t.id, task: t.task })), episodesPerMember: tasks.length, quorum: 1,
          deadline: new Date(now.getTime() + 3_600_000).toISOString(), createdAt: now.toISOString(),
        }),
      ),
    );
    // Two replica processes on cores 0 and 1; the 1-replica measurement routes everything to the first.
    for (const core of [0, 1]) {
      children.push(spawnEsopt(['replica', '--run', run, '--id', `core-${core}`, '--store', root, '--json'], { stdio: 'ignore', ...(pinned ? { core } : {}) }));
    }
    const replicas: Array<{ id: string; baseUrl: string }> = [];
    for (const id of ['core-0', 'core-1']) {
      for (;;) {
        const announced = await readJson(store, keys.replica(run, id), ReplicaAnnouncement);
        if (announced) {
          replicas.push({ id, baseUrl: announced.baseUrl });
          break;
        }
        await sleep(50);
      }
    }
    const played = { episodes: 0, ms: 0, completionTokens: 0 };
    const play = async (count: number): Promise<number> => {
      const routing = routeMembers(members, replicas.slice(0, count));
      let next = 0;
      const started = performance.now();
      const worker = async () => {
        for (let i = next++; i < tasks.length; i = next++) {
          const member = members[i % members.length].index;
          const endpoint = endpointOf(routing, member);
          // No fallbacks: a measurement must not move load from one count to the other.
          const policy = new HttpPolicy({ baseUrl: endpoint.baseUrl, model: memberModelName(0, member), ...o.config.generation, seed: i, guidedDecoding: true, retries: 20 });
          const r = await runEpisode({ definition: environment, task: tasks[i].task, options, policy, seed: i });
          if (r.error) throw new Error(`bench episode ${i} failed: ${r.error}`);
          played.episodes++;
          played.ms += r.durationMs;
          played.completionTokens += r.tokens.completion;
        }
      };
      await Promise.all(Array.from({ length: o.concurrency }, worker));
      return tasks.length / ((performance.now() - started) / 1000);
    };
    log(`2 replica processes${pinned ? ' pinned to cores 0 and 1' : ''} serving; ${o.rounds} interleaved round(s) of ${o.episodes} episodes …`);
    await play(2); // warm-up: both replicas load their sessions and switch members once
    const rounds: ReplicasBenchResult['rounds'] = [];
    for (let r = 0; r < o.rounds; r++) {
      for (const count of r % 2 === 0 ? [1, 2] : [2, 1]) rounds.push({ replicas: count, episodes_per_s: await play(count) });
    }
    const one = median(rounds.filter((r) => r.replicas === 1).map((r) => r.episodes_per_s));
    const two = median(rounds.filter((r) => r.replicas === 2).map((r) => r.episodes_per_s));
    const usage = { durationMs: played.ms / played.episodes, memoryMb: 1024, completionTokens: Math.round(played.completionTokens / played.episodes), episodesPerInvocation: 1 };
    const scaling = two / one;
    return {
      episodes_per_s_1: one,
      episodes_per_s_2: two,
      scaling,
      pinned,
      usd_per_1000_episodes_1: costOfEpisodes(1000, usage, measuredPrices()).usd,
      usd_per_1000_episodes_2: costOfEpisodesWithReplicas(1000, usage, 2, Math.min(2, scaling), measuredPrices()).usd,
      rounds,
    };
  } finally {
    for (const c of children) c.kill('SIGTERM');
    rmSync(root, { recursive: true, force: true });
  }
}

export const options = z.object({
  model: ModelSpecOption('models/sudoku-4x4-demo'),
  mode: z.enum(['full', 'lowrank']).default('full'),
  episodes: int(2, 100_000).default(48),
  concurrency: int(1, 1024).default(8),
  rounds: int(1, 50).default(3),
});

export async function run(o: z.output<typeof options>, log: Log) {
  const config = RunConfig.parse({
    name: 'bench-replicas',
    environment: { name: 'sudoku', options: { size: 4, blanks: 6, invalidMove: 'waste', observation: 'next-cell', constrainActions: true } },
    tasks: { seed: 1 },
    model: o.model,
    mode: o.mode,
    es: { population: 16, sigma: 0.02, alpha: 0.02 },
    generation: { temperature: 0, maxTokens: 12 },
    // Iteration 0 is staged and never updated: the replicas serve its members for the whole measurement.
    iterations: 1,
    seed: 7,
  });
  const result = await benchReplicas({ config, episodes: o.episodes, concurrency: o.concurrency, rounds: o.rounds }, log);
  return { ...result, machine: machineInfo() };
}
