/**
 * The ES loop. Per iteration k:
 *   manifest → population live on the server → fan-out → collect from the store (quorum + deadline, or
 *   all arrived) → tell → θ updated in place → UpdateRecord → log entry → checkpoint when due → metrics row.
 * Everything a later iteration depends on is in the store, so a run killed at any point resumes exactly:
 * θ is rebuilt from the newest verified checkpoint replayed through the log, an update that was recorded
 * but not yet logged is replayed from its UpdateRecord (never re-collected, so no late record sneaks in),
 * and an iteration that never recorded an update re-dispatches only the episodes whose records are missing.
 */
import { ask, tell } from '../../shared/es.ts';
import { keys } from '../../shared/keys.ts';
import type { DispatchOutcome, Fanout } from '../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import {
  EvaluationResult,
  IterationManifest,
  MetricsRow,
  RunConfig,
  UpdateRecord,
  type PolicyEndpoint,
  RewardRecord,
  type TaskRef,
} from '../../shared/schemas/index.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import type { EnvironmentDefinition } from '../../environments/environment.ts';
import type { Engine, Population } from '../engine.ts';
import { appendLog, writeCheckpoint } from './checkpoints.ts';
import { restoreFromLog, type WeightHost } from './restore.ts';
import { classifyRecords, type Classification } from './classify-records.ts';
import { collectUntil } from './collect.ts';
import { RewardCollector } from '../../shared/store/reward-collector.ts';
import { iterationTaskSeed } from './task-seed.ts';
import { iterationRequests } from '../fanout/iteration-requests.ts';
import { evaluate } from './evaluation.ts';
import type { FaultHook } from './fault-points.ts';
import { applyLogEntry, logEntryFor, normalizedOf } from './weight-update.ts';
import { endpointOf, type ReplicaSet } from './replica-set.ts';

export type { WeightHost };

/** Whatever serves members (the inference service): told which population is live. */
export interface PopulationHost {
  setPopulation(p: Population | null): void;
}

export interface TrainingOptions {
  run: string;
  config: RunConfig;
  store: ObjectStore;
  fanout: Fanout;
  weights: WeightHost;
  population: PopulationHost;
  /** Where episodes reach their policy (the inference server); `model` is filled in per member. */
  policy: Omit<PolicyEndpoint, 'model'>;
  environment: EnvironmentDefinition;
  /** Trainer replicas sharing the members' inference (replica-set.ts); absent: this process serves them all. */
  replicas?: ReplicaSet;
  pollMs?: number;
  faults?: FaultHook;
  onStart?: (info: { resumedAt: number; replayed: number; skippedCheckpoints: Array<{ iteration: number; reason: string }> }) => void;
  onIteration?: (row: MetricsRow) => void;
  onEvaluation?: (result: EvaluationResult) => void;
}

export interface TrainingResult {
  run: string;
  rows: MetricsRow[];
  evaluations: EvaluationResult[];
  thetaHash: string;
  resumedAt: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

async function getJson<T>(store: ObjectStore, key: string, schema: { parse: (v: unknown) => T }): Promise<T | null> {
  const body = await store.get(key);
  return body ? schema.parse(JSON.parse(decoder.decode(body))) : null;
}

function putJson(store: ObjectStore, key: string, value: unknown, ifAbsent = false): Promise<boolean> {
  return store.put(key, encoder.encode(JSON.stringify(value)), { ifAbsent, contentType: 'application/json' });
}

/** The run's config as stored by its first start; `train --resume` continues with exactly this one. */
export async function readRunConfig(store: ObjectStore, run: string): Promise<RunConfig | null> {
  return getJson(store, keys.config(run), RunConfig);
}

function sumCosts(records: readonly RewardRecord[]): RewardRecord['cost'] {
  return records.reduce((a, r) => ({ usd: a.usd + r.cost.usd, lambdaGbSeconds: a.lambdaGbSeconds + r.cost.lambdaGbSeconds, gpuSeconds: a.gpuSeconds + r.cost.gpuSeconds }), {
    usd: 0,
    lambdaGbSeconds: 0,
    gpuSeconds: 0,
  });
}

export async function train(o: TrainingOptions): Promise<TrainingResult> {
  const { run, config, store, fanout, weights, population, environment } = o;
  const pollMs = o.pollMs ?? 100;
  const faults: FaultHook = o.faults ?? (() => {});
  const options = environment.optionsSchema.parse(config.environment.options);
  const segments = weights.segments();

  const stored = await readRunConfig(store, run);
  if (stored && JSON.stringify(stored) !== JSON.stringify(config)) throw new Error(`run ${run} exists with a different config; resume it with its own config or pick another run id`);
  if (!stored) await putJson(store, keys.config(run), config, true);

  // ---- restore θ: newest verified checkpoint, then the log, then any recorded-but-unlogged update ----
  const restored = await restoreFromLog(store, run, weights, config.rank);
  let next = restored.next;
  let replayed = restored.replayed;
  for (;;) {
    if (next >= config.iterations) break;
    const update = await getJson(store, keys.update(run, next), UpdateRecord);
    if (!update) break;
    const manifest = await getJson(store, keys.manifest(run, next), IterationManifest);
    if (!manifest) throw new Error(`iteration ${next} has an update record but no manifest`);
    const entry = logEntryFor(config, next, manifest.members, update.normalizedRewards, update.thetaHashAfter);
    await applyLogEntry(weights, entry, config.rank);
    const h = hashTheta(segments);
    if (h !== update.thetaHashAfter) throw new Error(`replaying the update record of iteration ${next} gave θ ${h}, it says ${update.thetaHashAfter}`);
    await appendLog(store, run, entry);
    next++;
    replayed++;
  }
  // A process killed between its log entry and its metrics row leaves a hole in the metrics: fill it.
  for (let k = 0; k < next; k++) {
    if (await store.get(keys.metricsRow(run, k))) continue;
    const update = await getJson(store, keys.update(run, k), UpdateRecord);
    const manifest = await getJson(store, keys.manifest(run, k), IterationManifest);
    if (update && manifest) await putJson(store, keys.metricsRow(run, k), await rowFromUpdate(manifest, update));
  }
  o.onStart?.({ resumedAt: next, replayed, skippedCheckpoints: restored.skippedCheckpoints });

  const evalTasks: TaskRef[] = environment.sampleTasks('eval', config.tasks.evalCount, config.tasks.seed, options).map((t) => ({ id: t.id, task: t.task }));
  const evaluations: EvaluationResult[] = [];
  const evaluationOf = async (k: number): Promise<EvaluationResult> => {
    const existing = await getJson(store, keys.evaluationOf(run, k), EvaluationResult);
    if (existing) return existing;
    const result = await evaluate({ store, fanout, run, config, iteration: k, thetaHash: hashTheta(segments), tasks: evalTasks, policy: o.policy, pollMs });
    await putJson(store, keys.evaluationOf(run, k), result);
    o.onEvaluation?.(result);
    return result;
  };

  for (let k = next; k < config.iterations; k++) {
    const evaluation = k === 0 || k % config.evalInterval === 0 ? await evaluationOf(k) : null;
    const row = await iteration(k, evaluation);
    await putJson(store, keys.metricsRow(run, k), row);
    o.onIteration?.(row);
  }
  await evaluationOf(config.iterations);
  // The last update is checked too: a run never ends with a replica holding another θ.
  await o.replicas?.check(config.iterations, hashTheta(segments));

  const rows: MetricsRow[] = [];
  for (let k = 0; k < config.iterations; k++) {
    const row = await getJson(store, keys.metricsRow(run, k), MetricsRow);
    if (row) rows.push(row);
  }
  for (let k = 0; k <= config.iterations; k++) {
    const e = await getJson(store, keys.evaluationOf(run, k), EvaluationResult);
    if (e) evaluations.push(e);
  }
  return { run, rows, evaluations, thetaHash: hashTheta(segments), resumedAt: next };

  /** One iteration, from manifest to checkpoint; returns its metrics row. */
  async function iteration(k: number, evaluation: EvaluationResult | null): Promise<MetricsRow> {
    const t0 = performance.now();
    const thetaHashBefore = hashTheta(segments);
    let manifest = await getJson(store, keys.manifest(run, k), IterationManifest);
    if (manifest && manifest.thetaHash !== thetaHashBefore) throw new Error(`iteration ${k}'s manifest was made for θ ${manifest.thetaHash}, but θ is ${thetaHashBefore}`);
    // Routing is planned afresh even on resume: the replicas that served before may be gone.
    const members = manifest?.members ?? ask(config.es);
    const routing = o.replicas ? await o.replicas.plan(k, thetaHashBefore, members) : undefined;
    if (!manifest) {
      const tasks = environment.sampleTasks('train', config.tasks.trainPerIteration, iterationTaskSeed(config.tasks.seed, k), options).map((t) => ({ id: t.id, task: t.task }));
      const now = Date.now();
      manifest = IterationManifest.parse({
        run,
        iteration: k,
        runSeed: config.seed,
        thetaHash: thetaHashBefore,
        sigma: config.es.sigma,
        mode: config.mode,
        rank: config.rank,
        members,
        tasks,
        ...(routing ? { routing } : {}),
        episodesPerMember: tasks.length,
        quorum: config.quorum,
        deadline: new Date(now + config.deadlineMs).toISOString(),
        createdAt: new Date(now).toISOString(),
      });
      await putJson(store, keys.manifest(run, k), manifest, true);
    }
    const m = manifest;
    population.setPopulation({ runSeed: m.runSeed, iteration: k, sigma: m.sigma, rank: m.rank, members: m.members });
    const tManifest = performance.now();

    // Fan out only the episodes whose records are not already in the store (all of them, unless resuming).
    const prefix = keys.rewards(run, k);
    const present = new Set(await store.list(prefix));
    const deadlineAt = Date.now() + config.deadlineMs;
    const requests = iterationRequests({
      run,
      iteration: k,
      runSeed: config.seed,
      members: m.members.map((x) => x.index),
      tasks: m.tasks,
      environment: config.environment,
      policy: o.policy,
      generation: config.generation,
      deadline: new Date(deadlineAt),
    })
      .filter((r) => !present.has(keys.reward(run, k, r.member, r.task.id)))
      .map((r) => (routing && r.member !== 'base' ? { ...r, policy: { ...r.policy, ...endpointOf(routing, r.member) } } : r));
    const stragglers = new AbortController();
    const recordsIn = new AbortController();
    let settledAt: number | null = null;
    // Both fan-out adapters settle a request only once its record is in the store (or it failed for good),
    // so after settling nothing more is coming: collection closes at the next listing.
    let outcomes: DispatchOutcome[] = [];
    const settled = (requests.length > 0 ? fanout.dispatch(requests, { concurrency: config.workers, timeoutMs: config.deadlineMs, signal: stragglers.signal, recordsIn: recordsIn.signal }) : Promise.resolve([]))
      .then((o) => {
        outcomes = o;
      })
      .catch(() => {})
      .finally(() => {
        settledAt = performance.now();
      });
    await faults('after-fanout', k);

    const expectedPairs = m.members.flatMap((x) => m.tasks.map((t) => ({ member: x.index, task: t.id })));
    const expected = expectedPairs.length;
    const collector = new RewardCollector(store, run, k, { expected: expectedPairs });
    let classification: Classification | null = null;
    await collectUntil(collector, {
      pollMs,
      settled,
      done: (snapshot, isSettled) => {
        const c = (classification = classifyRecords(m, snapshot, config.failedEpisodeReward));
        if (c.arrived >= expected || isSettled) return true;
        const now = Date.now();
        if (now >= deadlineAt && c.counted.length >= config.quorum * expected) return true;
        // Past the deadline every episode has been abandoned; half a deadline more is the grace for stores to catch up.
        return now >= deadlineAt + config.deadlineMs / 2;
      },
    });
    const tClosed = performance.now();
    // Episodes still running now are stragglers: stop them. When every record is in, the workers are only
    // finishing up; let them, so none is killed mid-reply, and tell a fan-out that only waits for records
    // (Event invokes) that it need not list again.
    if (classification!.arrived < expected) stragglers.abort(new Error(`iteration ${k} closed`));
    else recordsIn.abort();
    population.setPopulation(null);
    await settled;
    const c: Classification = classification!;
    // Without a record at the close: timed out when the fan-out says it ran out of time.
    const arrivedPairs = new Set([...c.counted, ...c.failures].map((r) => `${r.member}/${r.task}`));
    const timedOut = outcomes.filter((o) => o.timedOut && !arrivedPairs.has(`${o.request.member}/${o.request.task.id}`)).length;

    // ---- update ----
    const told = tell(m.members, c.rewards, { alpha: config.es.alpha, shaping: config.es.shaping });
    const normalized = normalizedOf(told);
    const entry = logEntryFor(config, k, m.members, normalized, '');
    await applyLogEntry(weights, entry, config.rank);
    const thetaHashAfter = hashTheta(segments);
    await faults('after-update', k);
    const update: UpdateRecord = {
      run,
      iteration: k,
      counted: c.counted.map((r) => ({ member: r.member, task: r.task })),
      memberRewards: told.counted.map((member, i) => ({ member, reward: told.memberRewards[i] })),
      normalizedRewards: normalized,
      thetaHashBefore,
      thetaHashAfter,
      ignored: { duplicates: c.duplicates, failed: config.failedEpisodeReward === null ? c.failures.length : 0, invalid: c.invalid.length },
      failures: c.failures,
      invalidRecords: c.invalid,
    };
    if (!(await putJson(store, keys.update(run, k), update, true))) throw new Error(`iteration ${k} already has an update record: is another trainer running this run?`);
    await faults('after-update-record', k);
    await appendLog(store, run, { ...entry, thetaHashAfter });
    const tUpdated = performance.now();

    if ((k + 1) % config.checkpointInterval === 0 || k + 1 === config.iterations) {
      await writeCheckpoint(store, run, k + 1, segments, () => faults('mid-checkpoint', k));
      await faults('after-checkpoint', k);
    }
    const tDone = performance.now();
    const episodesEnd = Math.min(settledAt ?? tClosed, tClosed);
    return MetricsRow.parse({
      ...statsOf(m, c.counted.map((r) => r.record), c, { missing: expected - c.arrived, timedOut }, thetaHashAfter, evaluation),
      durations: {
        manifest: tManifest - t0,
        episodes: episodesEnd - tManifest,
        collect: tClosed - episodesEnd,
        update: tUpdated - tClosed,
        checkpoint: tDone - tUpdated,
        total: tDone - t0,
      },
    });
  }

  function statsOf(
    m: IterationManifest,
    records: readonly RewardRecord[],
    c: Pick<Classification, 'failures' | 'invalid'>,
    absent: Pick<MetricsRow, 'missing' | 'timedOut'>,
    thetaHashAfter: string,
    evaluation: EvaluationResult | null,
  ): Omit<MetricsRow, 'durations'> {
    const rewards = records.map((r) => (r.error === null ? r.reward : (config.failedEpisodeReward ?? 0)));
    return {
      run,
      iteration: m.iteration,
      expected: m.members.length * m.tasks.length,
      counted: records.length,
      failed: c.failures.length,
      invalid: c.invalid.length,
      ...absent,
      meanReward: rewards.length ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null,
      maxReward: rewards.length ? Math.max(...rewards) : null,
      successRate: rewards.length ? rewards.filter((r) => r >= config.successThreshold).length / rewards.length : null,
      tokens: records.reduce((a, r) => ({ prompt: a.prompt + r.tokens.prompt, completion: a.completion + r.tokens.completion }), { prompt: 0, completion: 0 }),
      cost: sumCosts(records),
      thetaHashAfter,
      evaluation,
      finishedAt: new Date().toISOString(),
    };
  }

  /** The metrics row of an iteration whose process died before writing it (its timings died with it: zeros). */
  async function rowFromUpdate(m: IterationManifest, update: UpdateRecord): Promise<MetricsRow> {
    const records: RewardRecord[] = [];
    for (const { member, task } of update.counted) {
      const r = await getJson(store, keys.reward(run, m.iteration, member, task), RewardRecord);
      if (r) records.push(r);
    }
    const evaluation = await getJson(store, keys.evaluationOf(run, m.iteration), EvaluationResult);
    return MetricsRow.parse({
      ...statsOf(
        m,
        records,
        { failures: update.failures, invalid: update.invalidRecords },
        { missing: m.members.length * m.tasks.length - new Set([...update.counted, ...update.failures].map((r) => `${r.member}/${r.task}`)).size, timedOut: 0 },
        update.thetaHashAfter,
        evaluation,
      ),
      durations: { manifest: 0, episodes: 0, collect: 0, update: 0, checkpoint: 0, total: 0 },
    });
  }
}
