/**
 * An iteration's episodes: fan out those whose records are not in the store yet (all of them, unless
 * resuming), collect until the close, then stop the stragglers. The close comes when every record is in
 * or the fan-out has settled, or past the deadline once the quorum is counted, or half a deadline past
 * it whatever is counted; the classification is the one taken at the close, so a record landing after
 * it is never counted (it stays in the store).
 */
import { keys } from '../../../shared/keys.ts';
import type { DispatchOutcome } from '../../../shared/ports/fanout.ts';
import type { IterationManifest, MemberRoutes } from '../../../shared/schemas/index.ts';
import { iterationRequests } from '../../fanout/iteration-requests.ts';
import { classifyRecords, type Classification } from './classify-records.ts';
import { collectUntil } from './collect.ts';
import type { LoopContext } from './loop-context.ts';
import { endpointOf } from './replica-set.ts';
import { RewardCollector } from './reward-collector.ts';

export interface PlayedEpisodes {
  /** The records as they stood at the close. */
  classification: Classification;
  /** Members × tasks. */
  expected: number;
  /** Episodes without a record at the close that the fan-out says ran out of time. */
  timedOut: number;
  /** performance.now() when the fan-out settled (null: not before the close), and at the close. */
  settledAt: number | null;
  closedAt: number;
}

export async function playEpisodes(ctx: LoopContext, m: IterationManifest, routing: MemberRoutes | undefined): Promise<PlayedEpisodes> {
  const { run, config, store, fanout, pollMs } = ctx;
  const k = m.iteration;
  const present = new Set(await store.list(keys.rewards(run, k)));
  const deadlineAt = Date.now() + config.deadlineMs;
  const requests = iterationRequests({
    run,
    iteration: k,
    runSeed: config.seed,
    members: m.members.map((x) => x.index),
    tasks: m.tasks,
    environment: config.environment,
    policy: ctx.policy,
    generation: config.generation,
    deadline: new Date(deadlineAt),
    ...(ctx.instructions ? { instructions: ctx.instructions } : {}),
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
  await ctx.faults('after-fanout', k);

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
  const closedAt = performance.now();
  const c: Classification = classification!;
  // Episodes still running now are stragglers: stop them. When every record is in, the workers are only
  // finishing up; let them, so none is killed mid-reply, and tell a fan-out that only waits for records
  // (Event invokes) that it need not list again.
  if (c.arrived < expected) stragglers.abort(new Error(`iteration ${k} closed`));
  else recordsIn.abort();
  ctx.population.setPopulation(null);
  await settled;
  const arrivedPairs = new Set([...c.counted, ...c.failures].map((r) => `${r.member}/${r.task}`));
  const timedOut = outcomes.filter((o) => o.timedOut && !arrivedPairs.has(`${o.request.member}/${o.request.task.id}`)).length;
  return { classification: c, expected, timedOut, settledAt, closedAt };
}
