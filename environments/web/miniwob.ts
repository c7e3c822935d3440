/**
 * MiniWoB++ task pages, unmodified, from a folder in MiniWoB's layout (`html/miniwob/<task>.html` beside
 * `html/core/` and `html/common/`). Served by the task server (task-folder.ts), opened in Chromium with the
 * bridge injected before the page's own scripts, and driven the way MiniWoB's own harness drives them:
 * `Math.seedrandom(seed)` then `core.startEpisodeReal()`, the goal from `core.getUtterance()`, the outcome from
 * the page's globals (`WOB_DONE_GLOBAL`, `WOB_RAW_REWARD_GLOBAL`, `WOB_REWARD_GLOBAL`, `WOB_REWARD_REASON`).
 *
 * Reward: MiniWoB's raw reward, in [-1, 1]; success is raw reward > 0. The time-decayed reward the page computes
 * (`WOB_REWARD_GLOBAL`) is in the step's info beside it. Time: MiniWoB ends an episode with −1 after
 * `core.EPISODE_MAX_TIME` (10 s) of page time, and decays rewards over it. The page runs on a virtual clock
 * (Playwright's clock) that moves only `stepMs` per action, so the timer counts actions, never the seconds the
 * agent spends thinking: with the defaults an episode times out after its tenth action.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { PolicyReply, ToolSpec } from '../../shared/ports/policy.ts';
import type { Environment, StepResult } from '../environment.ts';
import type { WebBackend, WebPage } from './backend.ts';
import { agentInterface, type AgentInterface } from './agent-interface.ts';
import { PageSession } from './page-session.ts';
import type { TaskServer } from './task-server.ts';
import type { MiniwobWebTask, WebOptions } from './task.ts';

type MiniwobOptions = NonNullable<WebOptions['miniwob']> & { dir: string };

/** The task pages of a folder, by name (`html/miniwob/<name>.html`), sorted. */
export function miniwobTaskNames(dir: string): string[] {
  let files: string[];
  try {
    files = readdirSync(join(dir, 'html', 'miniwob'));
  } catch {
    throw new Error(`${dir} is not a MiniWoB++-layout folder: it has no html/miniwob/ directory`);
  }
  const names = files.filter((f) => /^[a-z0-9][a-z0-9-]{0,63}\.html$/.test(f)).map((f) => f.slice(0, -'.html'.length));
  if (names.length === 0) throw new Error(`${join(dir, 'html', 'miniwob')} holds no task page (<name>.html)`);
  return names.sort();
}

/** What the page's globals say; read by esopt's own expression, checked here. */
const WobState = z.object({
  done: z.boolean(),
  raw: z.number().finite().min(-1).max(1),
  reward: z.number().finite(),
  reason: z.string().max(500).nullable(),
});
type WobState = z.infer<typeof WobState>;

const READ_STATE = `({ done: WOB_DONE_GLOBAL === true, raw: Number(WOB_RAW_REWARD_GLOBAL), reward: Number(WOB_REWARD_GLOBAL), reason: WOB_REWARD_REASON == null ? null : String(WOB_REWARD_REASON).slice(0, 500) })`;

export class MiniwobEnvironment implements Environment {
  readonly horizon: number;
  readonly systemPrompt: string;
  readonly tools?: ToolSpec[];
  readonly showsScreenshot: boolean;
  private readonly agent: AgentInterface;
  private readonly session: PageSession;
  private readonly options: MiniwobOptions;
  private goal = '';
  private steps = 0;

  constructor(
    private readonly task: MiniwobWebTask,
    private readonly web: WebOptions,
    private readonly server: TaskServer,
    private readonly backend: WebBackend,
  ) {
    if (!web.miniwob) throw new Error('a MiniWoB task needs the miniwob option: { dir } (a MiniWoB++-layout folder)');
    if (backend.name !== 'chromium') throw new Error('MiniWoB pages run in Chromium only (their timers run on its virtual clock): set backend "chromium"');
    // A pushed folder is on disk by now (definition.ts makes it so before an episode starts).
    if (web.miniwob.dir === undefined) throw new Error('a MiniWoB episode needs its folder on disk: options miniwob.dir');
    this.options = { ...web.miniwob, dir: web.miniwob.dir };
    this.horizon = this.options.horizon;
    this.agent = agentInterface(web);
    this.systemPrompt = this.agent.systemPrompt;
    this.tools = this.agent.tools;
    this.showsScreenshot = this.agent.showsScreenshot;
    this.session = new PageSession(web);
    if (!miniwobTaskNames(this.options.dir).includes(task.miniwob)) throw new Error(`no MiniWoB task page ${task.miniwob}.html in ${join(this.options.dir, 'html', 'miniwob')}`);
  }

  private async state(page: WebPage): Promise<WobState> {
    const raw = await this.session.bounded(() => page.evaluate!(READ_STATE), "reading MiniWoB's globals");
    const parsed = WobState.safeParse(raw);
    if (!parsed.success) throw new Error("the page's MiniWoB globals are not a MiniWoB outcome (WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL in [-1, 1], ...)");
    return parsed.data;
  }

  async reset(_seed: number): Promise<string> {
    this.steps = 0;
    const base = this.server.mount(this.options.dir);
    const page = await this.session.open(this.backend, {
      url: `${base}html/miniwob/${this.task.miniwob}.html`,
      allowedOrigin: this.server.origin,
      screenLines: this.agent.screenLines,
      script: true,
      virtualClock: true,
    });
    // As MiniWoB's harness does: seed the page's Math.random, then start the episode (its timer starts now, in page time).
    const utterance = await this.session.bounded(
      () => page.evaluate!(`(function () { Math.seedrandom(${JSON.stringify(this.task.seed)}); core.startEpisodeReal(); var u = core.getUtterance(); return typeof u === 'string' ? u : u && u.utterance; })()`),
      'starting the MiniWoB episode',
    );
    if (typeof utterance !== 'string' || utterance.trim() === '') throw new Error('the page gave no instruction (core.getUtterance())');
    this.goal = utterance.trim().slice(0, 2000);
    return this.render(await this.session.bounded(() => this.agent.view(page), 'reading the page'), null);
  }

  private render(view: string, note: string | null): string {
    return [`Goal: ${this.goal}`, ...(note ? [note] : []), `Step ${this.steps} of ${this.horizon}.`, view].join('\n');
  }

  private async end(state: WobState, observation: string, info: Record<string, unknown>): Promise<StepResult> {
    await this.session.end();
    const outcome = { success: state.done && state.raw > 0, rawReward: state.done ? state.raw : 0, timeDecayedReward: state.done ? state.reward : 0, reason: state.reason };
    return { observation, done: true, reward: outcome.rawReward, info: { ...info, ...outcome } };
  }

  async step(action: PolicyReply): Promise<StepResult> {
    const page = this.session.current();
    this.steps++;
    try {
      const parsed = this.agent.parse(action);
      if (parsed.ok && parsed.action.kind === 'done') {
        const state = await this.state(page);
        return this.end(state, `Goal: ${this.goal}\nDone. The page reports ${state.done ? `reward ${state.raw}` : 'no outcome: the task was not finished'}.`, { action: 'done' });
      }
      let note: string;
      let ok = false;
      if (!parsed.ok) note = `Error: ${parsed.error}`;
      else {
        const performed = parsed.action as Exclude<typeof parsed.action, { kind: 'done' }>;
        const problem = await this.session.act(page, performed, this.agent.said(action));
        ok = problem === null;
        note = problem === null ? `Last action: ${this.agent.said(action)}` : `Error: ${problem}`;
      }
      // Every step, acted or not, costs the page `stepMs` of its own time: its timers fire as they fall due.
      await this.session.bounded(() => page.advanceClock!(this.options.stepMs), 'moving the page clock');
      const state = await this.state(page);
      if (state.done) return this.end(state, `Goal: ${this.goal}\nThe task is over: reward ${state.raw}${state.reason ? ` (${state.reason})` : ''}.`, { ok });
      const view = await this.session.bounded(() => this.agent.view(page), 'reading the page');
      if (this.steps >= this.horizon) return this.end(state, `${this.render(view, note)}\nNo actions left; the task was not finished.`, { ok, horizon: true });
      return { observation: this.render(view, note), done: false, info: { ok, ...(ok ? {} : { error: note.slice(7) }) } };
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      return this.end({ done: false, raw: 0, reward: 0, reason: null }, `Goal: ${this.goal}\nThe episode ended: ${message}`, { error: message });
    }
  }

  async screenshot(): Promise<Uint8Array | null> {
    return this.session.screenshot();
  }

  async close(): Promise<void> {
    await this.session.close();
  }
}
