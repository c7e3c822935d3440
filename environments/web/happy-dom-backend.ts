/**
 * happy-dom: the same task pages, served by the same task server, in an in-process DOM — an order of
 * magnitude cheaper than Chromium, for training and unit tests. Actions are the bridge's DOM events.
 * Requests to anything but the task server are refused by the fetch interceptor, WebSockets are not
 * available, navigation to another origin and popups are disabled, and each episode gets a fresh
 * browser context.
 *
 * Page scripts run in a Node `vm` context, which is not a security boundary: this backend is for our
 * own task pages only, and a page that loops forever would block the process — the Chromium backend
 * is the one that contains hostile or hung pages.
 */
import { Browser, BrowserNavigationCrossOriginPolicyEnum, type BrowserContext, type BrowserPage, type BrowserWindow } from 'happy-dom';
import type { WebAction } from './action.ts';
import { withTimeout, type OpenPageOptions, type PageVerdict, type WebBackend, type WebPage } from './backend.ts';

interface Bridge {
  setScreen(lines: number): void;
  observe(): string;
  axtree(maxLines: number): string;
  check(kind: string, id: number | null, arg: string | null): string | null;
  scroll(direction: string): void;
  act(kind: string, id: number | null, arg: string | null): void;
  result(): PageVerdict;
}

export class HappyDomBackend implements WebBackend {
  readonly name = 'happy-dom' as const;

  async open(options: OpenPageOptions): Promise<WebPage> {
    const blocked: string[] = [];
    const browser = new Browser({
      settings: {
        enableJavaScriptEvaluation: true,
        suppressInsecureJavaScriptEnvironmentWarning: true,
        navigation: {
          disableChildPageNavigation: true,
          disableChildFrameNavigation: true,
          disableMainFrameNavigation: false,
          disableFallbackToSetURL: true,
          // A page may not navigate to another origin at all: a blocked navigation fetch would reject
          // where happy-dom does not catch it (an unhandled rejection that ends the worker process).
          crossOriginPolicy: BrowserNavigationCrossOriginPolicyEnum.sameOrigin,
          beforeContentCallback: (window) => closeSideDoors(window, blocked),
        },
        fetch: {
          interceptor: {
            beforeAsyncRequest: async ({ request }) => {
              if (new URL(request.url).origin === options.allowedOrigin) return undefined;
              blocked.push(request.url);
              throw new Error(`blocked: ${request.url} is not the task server`);
            },
            beforeSyncRequest: ({ request }) => {
              if (new URL(request.url).origin === options.allowedOrigin) return undefined;
              blocked.push(request.url);
              throw new Error(`blocked: ${request.url} is not the task server`);
            },
          },
        },
        timer: { maxTimeout: options.timeoutMs, maxIntervalTime: options.timeoutMs, maxIntervalIterations: 10_000, preventTimerLoops: true },
      },
    });
    const context = browser.defaultContext;
    const page = context.newPage();
    const happyPage = new HappyDomPage(browser, context, page, blocked);
    try {
      const response = await withTimeout(page.goto(options.url), options.timeoutMs, 'loading the page');
      if (!response?.ok) throw new Error(`the task server answered ${response?.status ?? 'nothing'} for ${options.url}`);
      happyPage.bridge().setScreen(options.screenLines);
    } catch (err) {
      await happyPage.close();
      throw err;
    }
    return happyPage;
  }

  async close(): Promise<void> {}
}

/**
 * What the fetch interceptor does not see, closed before the page's scripts run: happy-dom's WebSocket
 * connects with the `ws` package directly (no task page needs one, so none gets one, as in Chromium),
 * `window.open` would make a window this callback never sees (no popups: null, as a blocked popup is),
 * and its sendBeacon drops the rejection of the fetch it makes, which for a blocked URL would be an
 * unhandled rejection that ends the whole worker process.
 */
function closeSideDoors(window: BrowserWindow, blocked: string[]): void {
  class BlockedWebSocket {
    constructor(url: string | URL) {
      blocked.push(String(url));
      throw new window.DOMException(`blocked: WebSocket ${String(url)} is not allowed`, 'SecurityError');
    }
  }
  Object.defineProperty(window, 'WebSocket', { value: BlockedWebSocket, writable: false, configurable: false });
  const sendBeacon = (url: string, data?: string | null): boolean => {
    window.fetch(url, { method: 'POST', body: data ?? null }).catch(() => undefined);
    return true;
  };
  Object.defineProperty(window.navigator, 'sendBeacon', { value: sendBeacon, writable: false, configurable: false });
  // A popup is a new window that never passes through this callback, with a WebSocket of its own.
  Object.defineProperty(window, 'open', { value: () => null, writable: false, configurable: false });
}

class HappyDomPage implements WebPage {
  private closed = false;

  constructor(
    private readonly browser: Browser,
    private readonly context: BrowserContext,
    private readonly page: BrowserPage,
    readonly blockedRequests: string[],
  ) {}

  bridge(): Bridge {
    const bridge = (this.page.mainFrame.window as unknown as { __esopt?: Bridge }).__esopt;
    if (!bridge) throw new Error('the task page did not start (no bridge)');
    return bridge;
  }

  async observe(): Promise<string> {
    return this.bridge().observe();
  }

  async axtree(maxLines: number): Promise<string> {
    return this.bridge().axtree(maxLines);
  }

  async verdict(): Promise<PageVerdict> {
    const { done, success } = this.bridge().result();
    return { done, success };
  }

  async perform(action: Exclude<WebAction, { kind: 'done' }>): Promise<string | null> {
    const bridge = this.bridge();
    if (action.kind === 'noop') return null;
    if (action.kind === 'click-at' || action.kind === 'type-focused') return 'coordinates need a rendered page: use the chromium backend';
    if (action.kind === 'press-on') {
      const problem = bridge.check('focus', action.id, null);
      if (problem) return problem;
      bridge.act('focus', action.id, null);
      bridge.act('press', null, action.key);
      await new Promise((resolve) => setTimeout(resolve, 0));
      return null;
    }
    const id = 'id' in action ? action.id : null;
    const arg = action.kind === 'scroll' ? action.direction : action.kind === 'press' ? action.key : 'text' in action ? action.text : null;
    const problem = bridge.check(action.kind, id, arg);
    if (problem) return problem;
    if (action.kind === 'scroll') bridge.scroll(action.direction);
    else bridge.act(action.kind, id, arg);
    // Let the page's microtasks and zero-delay timers run, as a real browser would between actions.
    await new Promise((resolve) => setTimeout(resolve, 0));
    return null;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.page.close().catch(() => undefined);
    await this.context.close().catch(() => undefined);
    await this.browser.close().catch(() => undefined);
  }
}
