/**
 * An episode on a user's own web app (options `app`, tasks `{ start, goal, check }`). The page loads in
 * Chromium with the text-view bridge injected before its scripts; every request it makes to the app's origins
 * is made by esopt (backend.ts `proxy`: the outbound policy on the connection, bounded bodies, redirects
 * checked again), anything else is blocked. The evaluation's key, when given, rides on the app origin's requests
 * (added by esopt: the page's scripts never see it) and on the state endpoint's read.
 *
 * The page does not judge itself: when the agent says `done`, or its actions run out, esopt reads what the
 * task's check names and decides (app-check.ts). Reward 1 on success, else 0.
 */
import type { PolicyReply, ToolSpec } from '../../shared/ports/policy.ts';
import type { Environment, EnvironmentContext, StepResult } from '../environment.ts';
import { checkUrl } from '../outbound/address-policy.ts';
import { outboundFetch } from '../outbound/outbound-fetch.ts';
import { appOrigins, fetchState, judge, parsePageReading, readPageExpression, startUrl, type AppOptions, type Judgement } from './app-check.ts';
import type { WebBackend, WebPage } from './backend.ts';
import { agentInterface, type AgentInterface } from './agent-interface.ts';
import { PageSession } from './page-session.ts';
import type { AppWebTask, WebOptions } from './task.ts';

export class AppEnvironment implements Environment {
  readonly horizon: number;
  readonly systemPrompt: string;
  readonly tools?: ToolSpec[];
  readonly showsScreenshot: boolean;
  private readonly agent: AgentInterface;
  private readonly session: PageSession;
  private readonly app: AppOptions;
  private readonly start: string;
  private readonly origins: string[];
  private readonly keyOrigin: string;
  private steps = 0;

  constructor(
    private readonly task: AppWebTask,
    private readonly web: WebOptions,
    private readonly backend: WebBackend,
    private readonly context: EnvironmentContext,
  ) {
    if (!web.app) throw new Error('a task with a start and a check needs the app option: { url } (the app under evaluation)');
    if (backend.name !== 'chromium') throw new Error("a user's app runs in Chromium only: set backend \"chromium\"");
    this.app = web.app;
    this.horizon = this.app.horizon;
    this.agent = agentInterface(web);
    this.systemPrompt = this.agent.systemPrompt;
    this.tools = this.agent.tools;
    this.showsScreenshot = this.agent.showsScreenshot;
    this.session = new PageSession(web);
    this.origins = appOrigins(this.app);
    // Every origin is checked against the outbound policy here, before a browser opens (again on each connection).
    for (const origin of this.origins) checkUrl(new URL(origin), context.outbound);
    this.keyOrigin = new URL(this.app.url).origin;
    this.start = startUrl(task.start, this.app);
  }

  private fetcher(): typeof fetch {
    return outboundFetch(this.context.outbound, { timeoutMs: this.web.actionTimeoutMs, maxResponseBytes: this.app.maxResponseBytes, redirects: 'return' });
  }

  async reset(_seed: number): Promise<string> {
    this.steps = 0;
    const key = this.context.endpointKey;
    const page = await this.session.open(this.backend, {
      url: this.start,
      screenLines: this.agent.screenLines,
      script: true,
      proxy: { origins: this.origins, fetch: this.fetcher(), headers: (origin): Record<string, string> => (key && origin === this.keyOrigin ? { authorization: `Bearer ${key}` } : {}) },
    });
    await this.session.bounded(() => page.settle!(this.web.actionTimeoutMs), 'loading the start page');
    return this.render(await this.session.bounded(() => this.agent.view(page), 'reading the page'), null);
  }

  private render(view: string, note: string | null): string {
    return [`Goal: ${this.task.goal}`, ...(note ? [note] : []), `Step ${this.steps} of ${this.horizon}.`, view].join('\n');
  }

  /** esopt's judgement of the page as it is now (app-check.ts). */
  private async judge(page: WebPage): Promise<Judgement> {
    const reading = parsePageReading(await this.session.bounded(() => page.evaluate!(readPageExpression(this.task.check.elements ?? {})), 'reading the page for the check'));
    const path = this.task.check.fetch;
    const fetched = path === undefined ? undefined : await this.session.bounded(() => fetchState(outboundFetch(this.context.outbound, { timeoutMs: this.web.actionTimeoutMs, maxResponseBytes: this.app.maxResponseBytes }), new URL(path, this.keyOrigin).href, this.context.endpointKey), "reading the app's state");
    return judge(this.task.check, reading, fetched);
  }

  private async end(page: WebPage, observation: string, info: Record<string, unknown>): Promise<StepResult> {
    let judgement: Judgement;
    try {
      judgement = await this.judge(page);
    } catch (err) {
      return this.fail(`the check could not be made: ${err instanceof Error ? err.message : String(err)}`);
    }
    await this.session.end();
    return { observation, done: true, reward: judgement.success ? 1 : 0, info: { ...info, success: judgement.success, checked: judgement.document, blocked: page.blockedRequests.length } };
  }

  private async fail(message: string): Promise<StepResult> {
    await this.session.end();
    return { observation: `Goal: ${this.task.goal}\nThe episode ended: ${message}`, done: true, reward: 0, info: { success: false, error: message } };
  }

  async step(action: PolicyReply): Promise<StepResult> {
    const page = this.session.current();
    this.steps++;
    try {
      const parsed = this.agent.parse(action);
      if (parsed.ok && parsed.action.kind === 'done') return await this.end(page, `Goal: ${this.task.goal}\nDone; esopt checks the page.`, { action: 'done' });
      let note: string;
      let ok = false;
      if (!parsed.ok) note = `Error: ${parsed.error}`;
      else {
        const performed = parsed.action as Exclude<typeof parsed.action, { kind: 'done' }>;
        const problem = await this.session.act(page, performed, this.agent.said(action));
        ok = problem === null;
        note = problem === null ? `Last action: ${this.agent.said(action)}` : `Error: ${problem}`;
        // A click may have started a navigation: the next view is of the page it loads.
        if (ok) await this.session.bounded(() => page.settle!(this.web.actionTimeoutMs), 'loading the next page');
      }
      const view = await this.session.bounded(() => this.agent.view(page), 'reading the page');
      if (this.steps >= this.horizon) return await this.end(page, `${this.render(view, note)}\nNo actions left; esopt checks the page.`, { ok, horizon: true });
      return { observation: this.render(view, note), done: false, info: { ok, ...(ok ? {} : { error: note.slice(7) }) } };
    } catch (err) {
      return this.fail(err instanceof Error ? err.message : String(err));
    }
  }

  async screenshot(): Promise<Uint8Array | null> {
    return this.session.screenshot();
  }

  async close(): Promise<void> {
    await this.session.close();
  }
}
