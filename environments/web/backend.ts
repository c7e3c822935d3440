/** The browser port: the web environment drives pages through this, on Chromium or happy-dom. */
import type { WebAction } from './action.ts';

export interface PageVerdict {
  done: boolean;
  success: boolean;
}

/** One task page in its own fresh browser context. Every call may hang if the page does: callers bound them with timeouts. */
export interface WebPage {
  /** The text view (the bridge's rendering). */
  observe(): Promise<string>;
  /** The whole page as an accessibility tree with the text view's element ids (the bridge's), at most `maxLines` lines. */
  axtree(maxLines: number): Promise<string>;
  /** Performs an action (not `done`); resolves to the reason it is impossible, or null when it was done. */
  perform(action: Exclude<WebAction, { kind: 'done' }>): Promise<string | null>;
  verdict(): Promise<PageVerdict>;
  /** Requests the page made that were blocked (anything not to the task server). */
  readonly blockedRequests: readonly string[];
  /** Frees the context; safe to call twice, and gives up on a hung page rather than waiting for it. */
  close(): Promise<void>;
  /** Pages opened with `script: true`: evaluates an expression of esopt's own (never a request's) in the page. */
  evaluate?(expression: string): Promise<unknown>;
  /** Pages opened with `virtualClock: true`: moves the page's clock on, firing its timers as they fall due. */
  advanceClock?(ms: number): Promise<void>;
  /** Chromium: waits until a navigation an action started has loaded (at most `timeoutMs`). */
  settle?(timeoutMs: number): Promise<void>;
  /** Chromium: the viewport as PNG bytes; `marks` draws each element's id (the text view's [n]) beside it. */
  screenshot?(marks: boolean): Promise<Uint8Array>;
}

export interface OpenPageOptions {
  url: string;
  /** The origin the page may talk to directly (the task server); a user's app has none, only `proxy`. */
  allowedOrigin?: string;
  screenLines: number;
  /** Loading the page may take at most this long. */
  timeoutMs: number;
  /** A page that is not esopt's own (a task folder's): the bridge is injected before its scripts, and `evaluate` is offered. */
  script?: boolean;
  /** The page's timers and Date run on a clock that moves only by `advanceClock` (Chromium only). */
  virtualClock?: boolean;
  /**
   * A user's app (Chromium only): requests to these origins are made by esopt, not by the browser — through
   * `fetch` (environments/outbound/: the address checked on the connection, bodies bounded, redirects handed
   * back so the browser's next request is checked again) with `headers(origin)` added — and answered to the page.
   */
  proxy?: { origins: string[]; fetch: typeof fetch; headers(origin: string): Record<string, string> };
}

export interface WebBackend {
  readonly name: 'chromium' | 'happy-dom';
  open(options: OpenPageOptions): Promise<WebPage>;
  close(): Promise<void>;
}

/** Settles with `promise` or rejects with a TimeoutError after `ms`. */
export class TimeoutError extends Error {}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
