/**
 * One web episode: a task page in a fresh browser context, the goal and a text view as observations,
 * one action per step. The page judges its own success; the reward is 1 when it says so, else 0.
 * Every browser call is bounded by the action timeout and the episode's deadline, so no page can keep
 * an episode alive: a hung page ends the episode with reward 0 and the reason in `info.error`.
 */
import type { PolicyReply, ToolSpec } from '../../shared/ports/policy.ts';
import type { Environment, StepResult } from '../environment.ts';
import { SeededRandom } from '../random.ts';
import { agentInterface, type AgentInterface } from './agent-interface.ts';
import type { WebBackend } from './backend.ts';
import { PageSession } from './page-session.ts';
import type { TaskServer } from './task-server.ts';
import { taskType } from './task-types/index.ts';
import type { GeneratedWebTask, WebOptions } from './task.ts';

export class WebEnvironment implements Environment {
  readonly horizon: number;
  readonly systemPrompt: string;
  readonly tools?: ToolSpec[];
  readonly showsScreenshot: boolean;
  private readonly agent: AgentInterface;
  private readonly session: PageSession;
  private readonly goal: string;
  private steps = 0;

  constructor(
    private readonly task: GeneratedWebTask,
    private readonly options: WebOptions,
    private readonly server: TaskServer,
    private readonly backend: WebBackend,
  ) {
    const type = taskType(task.type);
    this.horizon = type.horizon;
    this.agent = agentInterface(options);
    this.systemPrompt = this.agent.systemPrompt;
    this.tools = this.agent.tools;
    this.showsScreenshot = this.agent.showsScreenshot;
    this.session = new PageSession(options);
    this.goal = type.generate(new SeededRandom(task.seed)).page.goal;
  }

  async reset(_seed: number): Promise<string> {
    this.steps = 0;
    const page = await this.session.open(this.backend, { url: this.server.urlOf(this.task), allowedOrigin: this.server.origin, screenLines: this.agent.screenLines });
    return this.render(await this.session.bounded(() => this.agent.view(page), 'reading the page'), null);
  }

  private render(view: string, note: string | null): string {
    return [`Goal: ${this.goal}`, ...(note ? [note] : []), `Step ${this.steps} of ${this.horizon}.`, view].join('\n');
  }

  private async end(success: boolean, observation: string, info: Record<string, unknown>): Promise<StepResult> {
    await this.session.end();
    return { observation, done: true, reward: success ? 1 : 0, info: { ...info, success } };
  }

  async step(action: PolicyReply): Promise<StepResult> {
    const page = this.session.current();
    this.steps++;
    const outOfSteps = this.steps >= this.horizon;
    try {
      const parsed = this.agent.parse(action);
      let note: string;
      let ok = false;
      if (!parsed.ok) note = `Error: ${parsed.error}`;
      else if (parsed.action.kind === 'done') {
        const verdict = await this.session.bounded(() => page.verdict(), 'reading the verdict');
        return this.end(verdict.success, `Goal: ${this.goal}\nDone. The page reports ${verdict.success ? 'success' : 'failure'}.`, { action: 'done' });
      } else {
        const performed = parsed.action;
        const problem = await this.session.act(page, performed, this.agent.said(action));
        ok = problem === null;
        note = problem === null ? `Last action: ${this.agent.said(action)}` : `Error: ${problem}`;
      }
      const verdict = await this.session.bounded(() => page.verdict(), 'reading the verdict');
      if (verdict.done) return this.end(verdict.success, `Goal: ${this.goal}\nThe task is over: ${verdict.success ? 'success' : 'failure'}.`, { ok });
      const view = await this.session.bounded(() => this.agent.view(page), 'reading the page');
      if (outOfSteps) return this.end(false, `${this.render(view, note)}\nNo actions left; the goal was not reached.`, { ok, horizon: true });
      return { observation: this.render(view, note), done: false, info: { ok, ...(ok ? {} : { error: note.slice(7) }) } };
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      return this.end(false, `Goal: ${this.goal}\nThe episode ended: ${message}`, { error: message });
    }
  }

  async screenshot(): Promise<Uint8Array | null> {
    return this.session.screenshot();
  }

  async close(): Promise<void> {
    await this.session.close();
  }
}
