/** What a heuristic-design problem provides: seeded instances, a baseline, and a scorer that drives the agent's function. */
import type { SeededRandom } from '../random.ts';

/** Calls the agent's function once, inside the sandbox. */
export type CallHeuristic = (args: unknown[]) => Promise<unknown>;

/** The agent's function returned something the problem cannot use (reward 0, reason shown). */
export class WrongReturnError extends Error {}

export interface InstanceResult {
  /** The cost of the agent's solution (bins used, tour length): lower is better. */
  cost: number;
  baselineCost: number;
}

export interface HeuristicProblem<Instance> {
  readonly name: string;
  /** The function the agent must define. */
  readonly functionName: string;
  /** The problem statement and the function's contract, shown at the start of the episode. */
  readonly statement: string;
  /** What the baseline is called in the score line ("first-fit"). */
  readonly baselineName: string;
  /** What the cost counts ("bins", "tour length"). */
  readonly costName: string;
  instances(random: SeededRandom, count: number): Instance[];
  /** Runs the agent's function on one instance; throws WrongReturnError when a result is unusable. */
  solve(instance: Instance, call: CallHeuristic): Promise<InstanceResult>;
  /**
   * Known decent heuristics, submitted by the oracle in order (its reward is the best of them, as
   * for any agent): the first is the better one, a later one may be a safe fallback.
   */
  readonly oracleSubmissions: readonly string[];
  /** A legal but arbitrary heuristic (the random policy's submission). */
  randomCode(random: SeededRandom): string;
}
