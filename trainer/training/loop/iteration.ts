/**
 * One ES iteration k, top to bottom: its manifest (made once, create-only; read back on resume) → the
 * population live → episodes played and collected until the close (episodes.ts) → tell → θ updated
 * in place → UpdateRecord (create-only) → log entry → checkpoint when due → its metrics row.
 */
import { esAt } from '../../../shared/schedule.ts';
import { ask, tell, type TellResult } from '../../../shared/es.ts';
import { keys } from '../../../shared/keys.ts';
import { EvaluationResult, IterationManifest, MetricsRow, UpdateRecord, type MemberRoutes } from '../../../shared/schemas/index.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import { targetsAll } from '../../../shared/targets.ts';
import { noiseField } from '../../../shared/noise-definition.ts';
import { appendLog, pruneCheckpoints, writeCheckpoint } from './checkpoints.ts';
import type { Classification } from './classify-records.ts';
import { playEpisodes } from './episodes.ts';
import type { LoopContext } from './loop-context.ts';
import { rowStats } from './metrics-row.ts';
import { readJson, writeJson } from '../../../shared/store/json.ts';
import { iterationTaskSeed } from './task-seed.ts';
import { applyTold, normalizedOf } from './weight-update.ts';

export async function runIteration(ctx: LoopContext, k: number, evaluation: EvaluationResult | null): Promise<MetricsRow> {
  const { run, config, store, weights, faults } = ctx;
  const t0 = performance.now();
  const thetaHashBefore = hashTheta(weights.segments());
  const { manifest: m, routing } = await openIteration(ctx, k, thetaHashBefore);
  ctx.population.setPopulation({ runSeed: m.runSeed, iteration: k, sigma: m.sigma, rank: m.rank, ...(m.targets ? { targets: m.targets } : {}), ...(m.noise ? { noise: m.noise } : {}), members: m.members });
  const tManifest = performance.now();

  const played = await playEpisodes(ctx, m, routing);
  const c = played.classification;

  const told = tell(m.members, c.rewards, { alpha: esAt(config.es, k, config.iterations).alpha, shaping: config.es.shaping });
  const entry = await applyTold(weights, config, k, m.members, told);
  await faults('after-update', k);
  if (!(await writeJson(store, keys.update(run, k), updateRecord(ctx, k, c, told, thetaHashBefore, entry.thetaHashAfter), true))) {
    throw new Error(`iteration ${k} already has an update record: is another trainer running this run?`);
  }
  await faults('after-update-record', k);
  await appendLog(store, run, entry);
  const tUpdated = performance.now();

  if ((k + 1) % config.checkpointInterval === 0 || k + 1 === config.iterations) {
    await writeCheckpoint(store, run, k + 1, weights.segments(), () => faults('mid-checkpoint', k));
    await faults('after-checkpoint', k);
    await pruneCheckpoints(store, run, config.checkpointKeep);
  }
  const tDone = performance.now();
  const episodesEnd = Math.min(played.settledAt ?? played.closedAt, played.closedAt);
  const absent = { missing: played.expected - c.arrived, timedOut: played.timedOut };
  return MetricsRow.parse({
    ...rowStats(config, m, c.counted.map((r) => r.record), c, absent, entry.thetaHashAfter, evaluation),
    durations: {
      manifest: tManifest - t0,
      episodes: episodesEnd - tManifest,
      collect: played.closedAt - episodesEnd,
      update: tUpdated - played.closedAt,
      checkpoint: tDone - tUpdated,
      total: tDone - t0,
    },
  });
}

/** Iteration k's manifest for θ_k (the stored one on resume), and this time's routing over the replicas. */
async function openIteration(ctx: LoopContext, k: number, thetaHash: string): Promise<{ manifest: IterationManifest; routing: MemberRoutes | undefined }> {
  const { run, config, store } = ctx;
  const stored = await readJson(store, keys.manifest(run, k), IterationManifest);
  if (stored && stored.thetaHash !== thetaHash) throw new Error(`iteration ${k}'s manifest was made for θ ${stored.thetaHash}, but θ is ${thetaHash}`);
  // Routing is planned afresh even on resume: the replicas that served before may be gone.
  const members = stored?.members ?? ask(config.es);
  const routing = ctx.replicas ? await ctx.replicas.plan(k, thetaHash, members) : undefined;
  if (stored) return { manifest: stored, routing };
  const tasks = ctx.tasks.train(config.tasks.trainPerIteration, iterationTaskSeed(config.tasks.seed, k));
  const now = Date.now();
  const manifest = IterationManifest.parse({
    run,
    iteration: k,
    runSeed: config.seed,
    thetaHash,
    sigma: esAt(config.es, k, config.iterations).sigma,
    mode: config.mode,
    rank: config.lora?.rank ?? config.rank,
    ...(targetsAll(config.targets) ? {} : { targets: config.targets }),
    ...noiseField(config.noise),
    ...(config.lora ? { lora: config.lora } : {}),
    members,
    tasks,
    ...(ctx.tasks.suite ? { suite: ctx.tasks.suite } : {}),
    ...(ctx.instructions ? { instructions: { name: ctx.instructions.name, manifest: ctx.instructions.manifest } } : {}),
    ...(routing ? { routing } : {}),
    episodesPerMember: tasks.length,
    quorum: config.quorum,
    deadline: new Date(now + config.deadlineMs).toISOString(),
    createdAt: new Date(now).toISOString(),
  });
  await writeJson(store, keys.manifest(run, k), manifest, true);
  return { manifest, routing };
}

function updateRecord(ctx: LoopContext, k: number, c: Classification, told: TellResult, thetaHashBefore: string, thetaHashAfter: string): UpdateRecord {
  return {
    run: ctx.run,
    iteration: k,
    counted: c.counted.map((r) => ({ member: r.member, task: r.task })),
    memberRewards: told.counted.map((member, i) => ({ member, reward: told.memberRewards[i] })),
    normalizedRewards: normalizedOf(told),
    thetaHashBefore,
    thetaHashAfter,
    ignored: { duplicates: c.duplicates, failed: ctx.config.failedEpisodeReward === null ? c.failures.length : 0, invalid: c.invalid.length },
    failures: c.failures,
    invalidRecords: c.invalid,
  };
}
