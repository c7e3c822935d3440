/**
 * Evaluation of θ_k: greedy episodes of the base model on the held-out tasks, run through the same fan-out
 * and store as training episodes (member `base`, under iteration k's prefix), so a resumed run re-runs
 * only the ones that are missing. Success = reward ≥ the run's threshold; the 95% interval is Wilson's.
 */
import { keys, parseRewardKey } from '../../shared/keys.ts';
import type { Fanout } from '../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { EvaluationResult, RewardRecord, type EpisodeRequest, type PolicyEndpoint, type RunConfig, type TaskRef } from '../../shared/schemas/index.ts';
import { pollRecords } from './collect.ts';
import { episodeSeed } from './episode-seed.ts';
import { wilsonInterval } from './wilson.ts';

export interface EvaluationInput {
  store: ObjectStore;
  fanout: Fanout;
  run: string;
  config: RunConfig;
  iteration: number;
  thetaHash: string;
  tasks: readonly TaskRef[];
  policy: PolicyEndpoint;
  pollMs: number;
}

const decoder = new TextDecoder();

export async function evaluate(input: EvaluationInput): Promise<EvaluationResult> {
  const { store, fanout, run, config, iteration, tasks } = input;
  const started = performance.now();
  const prefix = `${keys.rewards(run, iteration)}base/`;
  const present = new Set((await store.list(prefix)).map((k) => parseRewardKey(k)?.task));
  const deadline = new Date(Date.now() + config.deadlineMs).toISOString();
  const requests: EpisodeRequest[] = tasks
    .map((t, i) => ({ t, i }))
    .filter(({ t }) => !present.has(t.id))
    .map(({ t, i }) => ({
      run,
      iteration,
      member: 'base' as const,
      task: { id: t.id, value: t.task },
      environment: config.environment,
      policy: input.policy,
      // Greedy: the evaluation measures the policy, not the luck of sampling.
      generation: { ...config.generation, temperature: 0 },
      seed: episodeSeed(config.seed, iteration, 'base', i),
      deadline,
    }));
  const settled = requests.length > 0 ? fanout.dispatch(requests, { concurrency: config.workers, timeoutMs: config.deadlineMs }) : Promise.resolve([]);
  const wanted = new Set(tasks.map((t) => keys.reward(run, iteration, 'base', t.id)));
  const snapshot = await pollRecords(store, prefix, {
    pollMs: input.pollMs,
    settled,
    done: (objects, isSettled) => isSettled || objects.filter((o) => wanted.has(o.key)).length === wanted.size,
  });
  await settled;
  const byTask = new Map<string, RewardRecord>();
  for (const { key, body } of snapshot) {
    if (!wanted.has(key)) continue;
    const r = RewardRecord.safeParse(JSON.parse(decoder.decode(body)));
    if (r.success) byTask.set(r.data.task, r.data);
  }
  const perTask = tasks.map((t) => {
    const r = byTask.get(t.id);
    if (!r) return { task: t.id, reward: 0, error: 'no record arrived' };
    return { task: t.id, reward: r.reward, error: r.error };
  });
  const successes = perTask.filter((p) => p.error === null && p.reward >= config.successThreshold).length;
  const n = perTask.length;
  return EvaluationResult.parse({
    run,
    iteration,
    thetaHash: input.thetaHash,
    tasks: n,
    successes,
    failed: perTask.filter((p) => p.error !== null).length,
    successRate: n === 0 ? 0 : successes / n,
    interval: wilsonInterval(successes, n),
    meanReward: n === 0 ? 0 : perTask.reduce((a, p) => a + p.reward, 0) / n,
    perTask,
    durationMs: performance.now() - started,
  });
}
