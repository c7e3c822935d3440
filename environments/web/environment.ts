/**
 * One web episode: a task page in a fresh browser context, the goal and a text view as observations,
 * one action per step. The page judges its own success; the reward is 1 when it says so, else 0.
 * Every browser call is bounded by the action timeout and the episode's deadline, so no page can keep
 * an episode alive: a hung page ends the episode with reward 0 and the reason in `info.error`.
 */
import type { PolicyReply, ToolSpec } from '../../shared/ports/policy.ts';
import type { Environment, StepResult } from '../environment.ts';
import { SeededRandom } from '../random.ts';
import { agentInterface, PageCamera, type AgentInterface } from './agent-interface.ts';
import { TimeoutError, withTimeout, type WebBackend, type WebPage } from './backend.ts';
import type { TaskServer } from './task-server.ts';
import { taskType } from './task-types/index.ts';
import type { GeneratedWebTask, WebOptions } from './task.ts';

export class WebEnvironment implements Environment {
  readonly horizon: number;
  readonly systemPrompt: string;
  readonly tools?: ToolSpec[];
  readonly showsScreenshot: boolean;
  private readonly agent: AgentInterface;
  private readonly camera: PageCamera;
  private readonly goal: string;
  private page: WebPage | undefined;
  private steps = 0;
  private done = true;
  private deadline = 0;

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
    this.camera = new PageCamera(options.markIds);
    this.goal = type.generate(new SeededRandom(task.seed)).page.goal;
  }

  /** A browser call bounded by the action timeout and what is left of the episode. */
  private bounded<T>(call: () => Promise<T>, what: string): Promise<T> {
    const left = this.deadline - Date.now();
    if (left <= 0) return Promise.reject(new TimeoutError(`the episode ran past its ${this.options.episodeTimeoutMs} ms deadline`));
    return withTimeout(call(), Math.min(this.options.actionTimeoutMs, left), what);
  }

  async reset(_seed: number): Promise<string> {
    await this.closePage();
    this.camera.reset();
    this.steps = 0;
    this.done = false;
    this.deadline = Date.now() + this.options.episodeTimeoutMs;
    this.page = await this.backend.open({
      url: this.server.urlOf(this.task),
      allowedOrigin: this.server.origin,
      screenLines: this.agent.screenLines,
      timeoutMs: Math.min(this.options.actionTimeoutMs, this.options.episodeTimeoutMs),
    });
    const page = this.page;
    return this.render(await this.bounded(() => this.agent.view(page), 'reading the page'), null);
  }

  private render(view: string, note: string | null): string {
    return [`Goal: ${this.goal}`, ...(note ? [note] : []), `Step ${this.steps} of ${this.horizon}.`, view].join('\n');
  }

  private async end(success: boolean, observation: string, info: Record<string, unknown>): Promise<StepResult> {
    this.done = true;
    await this.closeAtEnd();
    return { observation, done: true, reward: success ? 1 : 0, info: { ...info, success } };
  }

  async step(action: PolicyReply): Promise<StepResult> {
    if (this.done || !this.page) throw new Error('step() after the episode ended; call reset() first');
    const page = this.page;
    this.steps++;
    const outOfSteps = this.steps >= this.horizon;
    try {
      const parsed = this.agent.parse(action);
      let note: string;
      let ok = false;
      if (!parsed.ok) note = `Error: ${parsed.error}`;
      else if (parsed.action.kind === 'done') {
        const verdict = await this.bounded(() => page.verdict(), 'reading the verdict');
        return this.end(verdict.success, `Goal: ${this.goal}\nDone. The page reports ${verdict.success ? 'success' : 'failure'}.`, { action: 'done' });
      } else {
        const performed = parsed.action;
        const problem = await this.bounded(() => page.perform(performed), `the action "${this.agent.said(action).slice(0, 80)}"`).catch((err: unknown) => {
          // Playwright refusing an action (not visible, detached...) is the agent's error, not the episode's end.
          if (err instanceof TimeoutError || !(err instanceof Error) || /closed|crash|disconnected/i.test(err.message)) throw err;
          return err.message.split('\n')[0];
        });
        ok = problem === null;
        note = problem === null ? `Last action: ${this.agent.said(action)}` : `Error: ${problem}`;
      }
      const verdict = await this.bounded(() => page.verdict(), 'reading the verdict');
      if (verdict.done) return this.end(verdict.success, `Goal: ${this.goal}\nThe task is over: ${verdict.success ? 'success' : 'failure'}.`, { ok });
      const view = await this.bounded(() => this.agent.view(page), 'reading the page');
      if (outOfSteps) return this.end(false, `${this.render(view, note)}\nNo actions left; the goal was not reached.`, { ok, horizon: true });
      return { observation: this.render(view, note), done: false, info: { ok, ...(ok ? {} : { error: note.slice(7) }) } };
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      return this.end(false, `Goal: ${this.goal}\nThe episode ended: ${message}`, { error: message });
    }
  }

  async screenshot(): Promise<Uint8Array | null> {
    const page = this.page;
    if (!page || this.done) return this.camera.take(undefined);
    return this.bounded(() => this.camera.take(page), 'taking a screenshot');
  }

  /** The picture of the state the episode ended in is taken before its page closes (PageCamera). */
  private async closeAtEnd(): Promise<void> {
    const page = this.page;
    if (page) await this.camera.keepLast(page, (take) => this.bounded(take, 'taking the last screenshot'));
    await this.closePage();
  }

  private async closePage(): Promise<void> {
    const page = this.page;
    this.page = undefined;
    await page?.close();
  }

  async close(): Promise<void> {
    this.done = true;
    await this.closePage();
  }
}
