/**
 * The EpisodeRequests of one iteration: every (member, task) pair once, each with its own seed, all
 * with one deadline. What the ES loop, `esopt dev cloud` and `esopt bench fanout` dispatch.
 */
import type { EpisodeInstructions, EpisodeRequest, EnvironmentSpec, GenerationOptions, MemberRef, PolicyEndpoint } from '../../shared/schemas/index.ts';
import { deriveSeed } from '../../environments/random.ts';

export interface IterationPlan {
  run: string;
  iteration: number;
  runSeed: number;
  members: MemberRef[];
  tasks: { id: string; task: unknown }[];
  environment: EnvironmentSpec;
  /** `model` is filled in per member: `base`, or `member-<iteration>-<index>` as the trainer serves it. */
  policy: Omit<PolicyEndpoint, 'model'>;
  generation: GenerationOptions;
  deadline: Date;
  /** The run's pinned instructions, carried by every request; absent: the environment's own prompt. */
  instructions?: EpisodeInstructions;
}

export function memberModel(iteration: number, member: MemberRef): string {
  return member === 'base' ? 'base' : `member-${iteration}-${member}`;
}

export function iterationRequests(plan: IterationPlan): EpisodeRequest[] {
  return plan.members.flatMap((member) =>
    plan.tasks.map((task, t) => ({
      run: plan.run,
      iteration: plan.iteration,
      member,
      task: { id: task.id, value: task.task },
      environment: plan.environment,
      policy: { ...plan.policy, model: memberModel(plan.iteration, member) },
      generation: plan.generation,
      seed: deriveSeed(plan.runSeed, plan.iteration, member === 'base' ? 0 : member + 1, t),
      deadline: plan.deadline.toISOString(),
      ...(plan.instructions ? { instructions: plan.instructions } : {}),
    })),
  );
}

/** The (member, task) pairs the requests ask for: what a RewardCollector may expect. */
export function requestedPairs(requests: readonly EpisodeRequest[]): { member: MemberRef; task: string }[] {
  return requests.map((r) => ({ member: r.member, task: r.task.id }));
}
