/**
 * The demo's control: best-of-N random search with exactly the ES run's training-episode budget. Round k
 * draws the same members (noise keys, signs, σ) and the same training tasks as ES iteration k, but every
 * candidate is a perturbation of θ₀ instead of θ_k, and nothing is learned from the rewards except which
 * candidate scored best. The winner θ₀ + sign·σ·ε becomes θ and is evaluated on the held-out tasks like
 * ES's θ_final. If ES beats this, the gain came from following the estimated gradient, not from trying
 * many perturbations and getting lucky.
 */
import { esAt } from '../../../shared/schedule.ts';
import { ask } from '../../../shared/es.ts';
import type { Fanout } from '../../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import type { EvaluationResult, Member, PolicyEndpoint, RunConfig, TaskRef } from '../../../shared/schemas/index.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import { targetsAll } from '../../../shared/targets.ts';
import { noiseField } from '../../../shared/noise-definition.ts';
import type { EnvironmentDefinition } from '../../../environments/environment.ts';
import type { Engine } from '../../engine/engine.ts';
import { iterationRequests, requestedPairs } from '../../fanout/iteration-requests.ts';
import { collectRewards } from '../../training/loop/index.ts';
import { evaluate } from '../../training/loop/index.ts';
import { iterationTaskSeed } from '../../training/loop/index.ts';

export interface RandomSearchInput {
  /** The run id the baseline's records go under (not the ES run's). */
  run: string;
  /** The ES run's config: population, σ, tasks per iteration, iterations, generation, seeds. */
  config: RunConfig;
  store: ObjectStore;
  fanout: Fanout;
  /** A fresh engine holding θ₀; its θ ends as the winner. */
  engine: Engine;
  population: { setPopulation(p: Parameters<Engine['setPopulation']>[0]): void };
  policy: Omit<PolicyEndpoint, 'model'>;
  environment: EnvironmentDefinition;
  evalTasks: readonly TaskRef[];
  pollMs?: number;
  onRound?: (round: number, best: Candidate) => void;
}

export interface Candidate {
  round: number;
  member: Member;
  /** Mean training reward over the round's tasks. */
  reward: number;
}

export interface RandomSearchResult {
  best: Candidate;
  candidates: number;
  episodes: number;
  failedEpisodes: number;
  evaluation: EvaluationResult;
}

export async function randomSearch(o: RandomSearchInput): Promise<RandomSearchResult> {
  const { config, store, fanout, engine, environment } = o;
  // Its rounds sample the environment's generator under the environment's prompt: refused rather than ignored.
  if (config.tasks.suite || config.instructions) throw new Error('random search samples the environment\'s own tasks under its own prompt: tasks.suite and instructions are for ES runs (leave them out of this config)');
  const pollMs = o.pollMs ?? 50;
  const options = environment.optionsSchema.parse(config.environment.options);
  const members = ask(config.es);
  // Candidates perturb, and the winner moves, only the run's targeted tensors, as ES's members and update do.
  const targeted = { ...(targetsAll(config.targets) ? {} : { targets: config.targets }), ...noiseField(config.noise) };
  let best: Candidate | null = null;
  let episodes = 0;
  let failedEpisodes = 0;
  for (let round = 0; round < config.iterations; round++) {
    const tasks = environment.sampleTasks('train', config.tasks.trainPerIteration, iterationTaskSeed(config.tasks.seed, round), options).map((t) => ({ id: t.id, task: t.task }));
    o.population.setPopulation({ runSeed: config.seed, iteration: round, sigma: esAt(config.es, round, config.iterations).sigma, rank: config.rank, ...targeted, members });
    const requests = iterationRequests({
      run: o.run,
      iteration: round,
      runSeed: config.seed,
      members: members.map((m) => m.index),
      tasks,
      environment: config.environment,
      policy: o.policy,
      generation: config.generation,
      deadline: new Date(Date.now() + config.deadlineMs),
    });
    const settled = fanout.dispatch(requests, { concurrency: config.workers, timeoutMs: config.deadlineMs });
    const snapshot = await collectRewards(store, o.run, round, { expected: requestedPairs(requests), pollMs, settled, done: (c, isSettled) => isSettled || c.records.length >= requests.length });
    await settled;
    o.population.setPopulation(null);
    episodes += snapshot.records.length;
    for (const m of members) {
      const rs = snapshot.records.filter((r) => r.member === m.index);
      failedEpisodes += rs.filter((r) => r.error !== null).length;
      // A failed episode scores 0 here, as in the ES run's success statistics.
      const reward = rs.length ? rs.reduce((a, r) => a + (r.error === null ? r.reward : 0), 0) / tasks.length : 0;
      // Ties keep the earlier candidate: the winner is the first to reach the best score.
      if (!best || reward > best.reward) best = { round, member: m, reward };
    }
    o.onRound?.(round, best!);
  }
  const winner = best!;
  // θ ← θ₀ + sign·σ·ε_winner: the same perturbation the server applied to serve that candidate.
  await engine.applyUpdate({ runSeed: config.seed, iteration: winner.round, coefficients: [{ noiseIndex: winner.member.noiseIndex, coef: winner.member.sign * esAt(config.es, winner.round, config.iterations).sigma }], rank: config.rank, ...targeted });
  const evaluation = await evaluate({
    store,
    fanout,
    run: o.run,
    config,
    iteration: config.iterations,
    thetaHash: hashTheta(engine.segments()),
    tasks: o.evalTasks,
    policy: o.policy,
    pollMs,
  });
  return { best: winner, candidates: members.length * config.iterations, episodes, failedEpisodes, evaluation };
}
