/**
 * How each environment judges an episode — turns what happened into its reward — by version. A result file
 * and a comparison name the version (shared/schemas/evaluation-results.ts, `JudgeRef`), and evaluations
 * judged by different versions are never compared. Invariant: whoever changes what reward an episode gets
 * for the same play (a new reward rule, a different verdict for the same page) raises that environment's
 * version here and says what changed; a change that keeps every reward (a faster check, a clearer error)
 * does not. The version says nothing of what the agent sees or how it answers (observation views, action
 * grammars): those are options, reported beside the result.
 */
import type { EnvironmentName } from '../shared/schemas/index.ts';

export interface JudgeVersion {
  version: number;
  /** What this version judges, in a sentence (docs/ENVIRONMENTS.md has the rules in full). */
  judges: string;
}

export const JUDGE_VERSIONS: Record<EnvironmentName, JudgeVersion> = {
  sudoku: { version: 1, judges: '1 for a grid solved correctly within the horizon, else 0; shapedReward: the fraction of blanks filled correctly' },
  tools: { version: 1, judges: "1 when the answer matches the reference (numbers within 0.01, strings normalised) or an MCP task's check passes, else 0" },
  web: { version: 1, judges: "the page's own verdict (1 or 0); MiniWoB++ pages: MiniWoB's raw reward in [-1, 1]; a web app task: its declarative success check (1 or 0)" },
  heuristic: { version: 1, judges: 'the best score the submitted heuristic reached on the instances, against the baseline' },
  openenv: { version: 1, judges: "the reward the OpenEnv server reports (within ±10⁶): the server's own judge" },
  rollout: { version: 1, judges: 'the reward your rollout agent reports: its own judge' },
};

export function judgeVersion(environment: EnvironmentName): number {
  return JUDGE_VERSIONS[environment].version;
}
