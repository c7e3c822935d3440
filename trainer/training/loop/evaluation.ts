/**
 * Evaluation of θ_k: greedy episodes of the base model on the held-out tasks, run through the same fan-out
 * and store as training episodes (member `base`, under iteration k's prefix), so a resumed run re-runs
 * only the ones that are missing. Success = reward ≥ the run's threshold; the 95% interval is Wilson's.
 */
import { keys, parseRewardKey } from '../../../shared/keys.ts';
import type { Fanout } from '../../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { EvaluationResult, type EpisodeInstructions, type PolicyEndpoint, type RunConfig, type TaskRef } from '../../../shared/schemas/index.ts';
import { collectUntil } from './collect.ts';
import { RewardCollector, type CollectedRewards } from './reward-collector.ts';
import { iterationRequests } from '../../fanout/iteration-requests.ts';
import { wilsonInterval } from '../../../shared/wilson.ts';

export interface EvaluationInput {
  store: ObjectStore;
  fanout: Fanout;
  run: string;
  config: RunConfig;
  iteration: number;
  thetaHash: string;
  tasks: readonly TaskRef[];
  policy: Omit<PolicyEndpoint, 'model'>;
  pollMs: number;
  /** The run's instructions: an evaluation measures the policy under the c_t it is trained under. */
  instructions?: EpisodeInstructions | null;
}

export async function evaluate(input: EvaluationInput): Promise<EvaluationResult> {
  const { store, fanout, run, config, iteration, tasks } = input;
  const started = performance.now();
  const prefix = `${keys.rewards(run, iteration)}base/`;
  const present = new Set((await store.list(prefix)).map((k) => parseRewardKey(k)?.task));
  const missing = tasks.filter((t) => !present.has(t.id)).length;
  // Every held-out episode counts (there is no quorum), so each gets the run's allowance from when a worker
  // can take it: with `workers` at a time, the last wave starts ⌈missing / workers⌉ − 1 allowances in.
  const waves = Math.max(1, Math.ceil(missing / config.workers));
  const requests = iterationRequests({
    run,
    iteration,
    runSeed: config.seed,
    members: ['base'],
    tasks: [...tasks],
    environment: config.environment,
    policy: input.policy,
    // Greedy: the evaluation measures the policy, not the luck of sampling.
    generation: { ...config.generation, temperature: 0 },
    deadline: new Date(Date.now() + waves * config.deadlineMs),
    ...(input.instructions ? { instructions: input.instructions } : {}),
  }).filter((r) => !present.has(r.task.id));
  const recordsIn = new AbortController();
  const settled = requests.length > 0 ? fanout.dispatch(requests, { concurrency: config.workers, timeoutMs: config.deadlineMs, recordsIn: recordsIn.signal }) : Promise.resolve([]);
  const collector = new RewardCollector(store, run, iteration, { expected: tasks.map((t) => ({ member: 'base' as const, task: t.id })) });
  const allIn = (c: CollectedRewards) => c.records.filter((r) => r.member === 'base').length >= tasks.length;
  const snapshot = await collectUntil(collector, { pollMs: input.pollMs, settled, done: (c, isSettled) => isSettled || allIn(c) });
  // Every record in: a fan-out waiting only for records (Event invokes) may settle now.
  if (allIn(snapshot)) recordsIn.abort();
  await settled;
  const byTask = new Map(snapshot.records.filter((r) => r.member === 'base').map((r) => [r.task, r]));
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
