/**
 * The page of one web episode, as the three kinds of episode (generated task pages, MiniWoB folders, a user's
 * app) hold it: opened fresh at reset with the episode's deadline starting then, every browser call bounded
 * by the action timeout and what is left of that deadline (so no page keeps an episode alive), screenshots
 * through one PageCamera, and at the end the picture of the last state taken before the page closes.
 */
import type { WebAction } from './action.ts';
import { PageCamera } from './agent-interface.ts';
import { TimeoutError, withTimeout, type OpenPageOptions, type WebBackend, type WebPage } from './backend.ts';
import type { WebOptions } from './task.ts';

export class PageSession {
  private readonly camera: PageCamera;
  private page: WebPage | undefined;
  private deadline = 0;
  private ended = true;

  constructor(private readonly web: Pick<WebOptions, 'actionTimeoutMs' | 'episodeTimeoutMs' | 'markIds'>) {
    this.camera = new PageCamera(web.markIds);
  }

  /** Closes the last episode's page and opens this episode's; its deadline starts now. */
  async open(backend: WebBackend, options: Omit<OpenPageOptions, 'timeoutMs'>): Promise<WebPage> {
    await this.closePage();
    this.camera.reset();
    this.ended = false;
    this.deadline = Date.now() + this.web.episodeTimeoutMs;
    this.page = await backend.open({ ...options, timeoutMs: Math.min(this.web.actionTimeoutMs, this.web.episodeTimeoutMs) });
    return this.page;
  }

  /** The running episode's page; stepping an ended episode is the caller's mistake. */
  current(): WebPage {
    if (this.ended || !this.page) throw new Error('step() after the episode ended; call reset() first');
    return this.page;
  }

  /** A browser call bounded by the action timeout and what is left of the episode. */
  bounded<T>(call: () => Promise<T>, what: string): Promise<T> {
    const left = this.deadline - Date.now();
    if (left <= 0) return Promise.reject(new TimeoutError(`the episode ran past its ${this.web.episodeTimeoutMs} ms deadline`));
    return withTimeout(call(), Math.min(this.web.actionTimeoutMs, left), what);
  }

  /**
   * Performs an action; resolves to null when it was done, or the page's reason it could not be (Playwright
   * refusing an action — not visible, detached — is the agent's error, not the episode's end). A timeout or a
   * closed, crashed or disconnected page rejects: the episode ends.
   */
  act(page: WebPage, action: Exclude<WebAction, { kind: 'done' }>, said: string): Promise<string | null> {
    return this.bounded(() => page.perform(action), `the action "${said.slice(0, 80)}"`).catch((err: unknown) => {
      if (err instanceof TimeoutError || !(err instanceof Error) || /closed|crash|disconnected/i.test(err.message)) throw err;
      return err.message.split('\n')[0]!;
    });
  }

  /** The page now (the last state's picture once the episode ended; PageCamera). */
  screenshot(): Promise<Uint8Array | null> {
    const page = this.page;
    if (!page || this.ended) return this.camera.take(undefined);
    return this.bounded(() => this.camera.take(page), 'taking a screenshot');
  }

  /** Ends the episode: the picture of the state it ended in is taken before its page closes. */
  async end(): Promise<void> {
    this.ended = true;
    const page = this.page;
    if (page) await this.camera.keepLast(page, (take) => this.bounded(take, 'taking the last screenshot'));
    await this.closePage();
  }

  /** Closes the page with no last picture (the environment is closed). */
  async close(): Promise<void> {
    this.ended = true;
    await this.closePage();
  }

  private async closePage(): Promise<void> {
    const page = this.page;
    this.page = undefined;
    await page?.close();
  }
}
