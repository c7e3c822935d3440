/** The heuristic-design problems by name. */
import type { HeuristicProblem } from '../problem.ts';
import type { HeuristicProblemName } from '../task.ts';
import { binPacking } from './bin-packing.ts';
import { tsp } from './tsp.ts';

export const PROBLEMS: Record<HeuristicProblemName, HeuristicProblem<unknown>> = {
  'bin-packing': binPacking,
  tsp: tsp,
};
