/**
 * One heuristic-design episode: the agent submits a function in a code block, sees its score (or why it
 * failed) and may submit improved versions until the horizon. The reward is the best score reached.
 */
import type { PolicyReply } from '../../shared/ports/policy.ts';
import type { Environment, StepResult } from '../environment.ts';
import { SeededRandom } from '../random.ts';
import { extractCode } from './code-block.ts';
import { evaluateSubmission } from './evaluate.ts';
import type { HeuristicProblem } from './problem.ts';
import { PROBLEMS } from './problems/index.ts';
import type { HeuristicOptions, HeuristicTask } from './task.ts';

export const HEURISTIC_SYSTEM_PROMPT = [
  'You design heuristics. Reply with one JavaScript function in a ```js code block; it is run in a sandbox (plain JavaScript built-ins only: no require, import, process, timers or I/O) and scored on test instances.',
  'After each submission you see its score or the error; you may then submit an improved version. Reply "done" to stop. Your reward is your best score.',
].join('\n');

export class HeuristicEnvironment implements Environment {
  readonly horizon: number;
  readonly systemPrompt = HEURISTIC_SYSTEM_PROMPT;
  private readonly problem: HeuristicProblem<unknown>;
  private readonly instances: unknown[];
  private steps = 0;
  private best = 0;
  private done = true;

  constructor(
    task: HeuristicTask,
    private readonly options: HeuristicOptions,
  ) {
    this.problem = PROBLEMS[task.problem];
    this.instances = this.problem.instances(new SeededRandom(task.seed), options.instances);
    this.horizon = options.submissions;
  }

  async reset(_seed: number): Promise<string> {
    this.steps = 0;
    this.best = 0;
    this.done = false;
    return `${this.problem.statement}\nYou have ${this.horizon} submission(s). Limits per submission: ${this.options.memoryMb} MB of memory, ${this.options.perCallMs} ms per call, ${this.options.totalMs} ms in all.`;
  }

  async step(action: PolicyReply): Promise<StepResult> {
    if (this.done) throw new Error('step() after the episode ended; call reset() first');
    this.steps++;
    const left = this.horizon - this.steps;
    const finish = (observation: string, info: Record<string, unknown>): StepResult => {
      const done = left <= 0 || info.stopped === true;
      this.done = done;
      const tail = done ? `\nThe episode is over; best score ${this.best.toFixed(4)}.` : `\nBest so far: ${this.best.toFixed(4)}. ${left} submission(s) left.`;
      return { observation: observation + tail, done, ...(done ? { reward: this.best } : {}), info: { ...info, best: this.best } };
    };

    if (action.text.trim().toLowerCase() === 'done') return finish('Stopped.', { stopped: true });
    const code = extractCode(action.text, this.problem.functionName);
    if (code === null) return finish(`Error: no code found; reply with a \`\`\`js code block defining ${this.problem.functionName}.`, { ok: false, error: 'no code block' });

    const evaluation = await evaluateSubmission(this.problem, this.instances, code, {
      memoryMb: this.options.memoryMb,
      perCallMs: this.options.perCallMs,
      totalMs: this.options.totalMs,
    });
    if (!evaluation.ok) {
      return finish(`Submission ${this.steps} scored 0: ${evaluation.reason}`, { ok: false, error: evaluation.kind, reason: evaluation.reason, score: 0 });
    }
    this.best = Math.max(this.best, evaluation.score);
    const costs = (pick: (r: { cost: number; baselineCost: number }) => number) => evaluation.results.map((r) => Number(pick(r).toFixed(1))).join(', ');
    const observation = [
      `Submission ${this.steps} scored ${evaluation.score.toFixed(4)} (1 = ${this.problem.baselineName}, higher is better).`,
      `${this.problem.costName} per instance: yours ${costs((r) => r.cost)}; ${this.problem.baselineName} ${costs((r) => r.baselineCost)}.`,
    ].join('\n');
    return finish(observation, { ok: true, score: evaluation.score, elapsedMs: Math.round(evaluation.elapsedMs) });
  }

  async close(): Promise<void> {
    this.done = true;
  }
}
