/**
 * Real Chromium through playwright-core. One browser process per backend, reused across episodes and
 * relaunched when it dies; a fresh context per episode. Isolation: every request that is not to the
 * task server is aborted inside the browser (context routes, WebSockets included), and as a second
 * wall the browser's proxy points at a closed loopback port, so nothing that slipped past a route
 * could leave the machine either. Actions are real input events (playwright's click/fill/check/...),
 * after the bridge has checked them against what is on screen.
 */
import { chromium, type Browser, type BrowserContext, type Page, type Route } from 'playwright-core';
import type { WebAction } from './action.ts';
import { PAGE_BRIDGE } from './page-bridge.ts';
import { withTimeout, type OpenPageOptions, type PageVerdict, type WebBackend, type WebPage } from './backend.ts';
import { chooseChromium, chromiumExecutable, LAMBDA_CHROMIUM_ARGS, type ChromiumChoice } from './chromium-executable.ts';

const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-dev-shm-usage',
  // Loopback is never proxied; everything else goes to a port nothing listens on.
  '--proxy-server=http://127.0.0.1:9',
  '--force-webrtc-ip-handling-policy=disable_non_proxied_udp',
];

/** Longest closing a context may take; a renderer stuck in a loop makes the browser restart instead. */
const CLOSE_TIMEOUT_MS = 3_000;
/** The window every page opens in: the size of the screenshots agents see and coordinates are pixels of. */
export const VIEWPORT = { width: 1280, height: 720 };
/** Where a virtual clock starts: 2026-01-01T00:00:00Z, the same for every episode. */
const VIRTUAL_CLOCK_START_MS = Date.UTC(2026, 0, 1);

/**
 * How long an idle browser (no open page) is kept for the next episode before it is closed, so that
 * a finished CLI run or worker exits instead of being held open by Chromium. $ESOPT_BROWSER_IDLE_MS.
 */
const IDLE_MS = Number(process.env.ESOPT_BROWSER_IDLE_MS ?? 5_000);

export class ChromiumBackend implements WebBackend {
  readonly name = 'chromium' as const;
  private browser: Promise<Browser> | undefined;
  private openPages = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Which browser (chromium-executable.ts): a missing one throws here, before any episode. */
  readonly choice: ChromiumChoice;

  constructor(executablePath?: string) {
    this.choice = chooseChromium(executablePath);
  }

  private launch(): Promise<Browser> {
    const args = this.choice.kind === 'lambda' ? [...ARGS, ...LAMBDA_CHROMIUM_ARGS] : ARGS;
    const launched = chromiumExecutable(this.choice)
      .then((executablePath) => chromium.launch({ executablePath, args, timeout: 30_000 }))
      .then((browser) => {
        browser.on('disconnected', () => {
          if (this.browser === launched) this.browser = undefined;
        });
        return browser;
      });
    launched.catch(() => {
      if (this.browser === launched) this.browser = undefined;
    });
    this.browser = launched;
    return launched;
  }

  private async liveBrowser(): Promise<Browser> {
    const browser = await (this.browser ?? this.launch());
    return browser.isConnected() ? browser : this.launch();
  }

  /** The browser's process id, from the browser itself (for operators and the restart test). */
  async browserPid(): Promise<number> {
    const browser = await this.liveBrowser();
    const cdp = await browser.newBrowserCDPSession();
    try {
      const info = (await cdp.send('SystemInfo.getProcessInfo')) as { processInfo: Array<{ type: string; id: number }> };
      const main = info.processInfo.find((p) => p.type === 'browser');
      if (!main) throw new Error('Chromium did not report its browser process');
      return main.id;
    } finally {
      await cdp.detach().catch(() => undefined);
    }
  }

  private pageClosed(): void {
    this.openPages--;
    if (this.openPages > 0) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.openPages === 0) void this.restart();
    }, IDLE_MS);
    this.idleTimer.unref();
  }

  async open(options: OpenPageOptions): Promise<WebPage> {
    clearTimeout(this.idleTimer);
    this.openPages++;
    // Once the page object exists, its close() does the bookkeeping, also when loading fails.
    let owned = false;
    try {
      return await this.openContext(options, () => (owned = true));
    } catch (err) {
      if (!owned) this.pageClosed();
      throw err;
    }
  }

  private async openContext(options: OpenPageOptions, own: () => void): Promise<WebPage> {
    let context: BrowserContext;
    try {
      context = await (await this.liveBrowser()).newContext({ serviceWorkers: 'block', acceptDownloads: false, viewport: VIEWPORT });
    } catch {
      // The browser died between episodes: start a new one, once.
      context = await (await this.launch()).newContext({ serviceWorkers: 'block', acceptDownloads: false, viewport: VIEWPORT });
    }
    const blocked: string[] = [];
    let page: Page;
    try {
      // Handlers may still be called while the context closes; their late rejections mean nothing.
      const proxy = options.proxy;
      await context.route('**/*', (route) => {
        const url = route.request().url();
        const origin = new URL(url).origin;
        if (origin === options.allowedOrigin) return route.continue().catch(() => undefined);
        if (proxy?.origins.includes(origin)) return proxied(route, proxy, origin, blocked);
        blocked.push(url);
        return route.abort('blockedbyclient').catch(() => undefined);
      });
      await context.routeWebSocket(/.*/, (ws) => {
        blocked.push(ws.url());
        ws.close({ code: 1008, reason: 'blocked' }).catch(() => undefined);
      });
      // A page of someone else's: the bridge goes in before any of its scripts run.
      if (options.script) await context.addInitScript({ content: PAGE_BRIDGE });
      page = await context.newPage();
      if (options.virtualClock) {
        // Installed, the fake clock still runs with the wall clock; paused, it moves only when advanced.
        // It starts at a fixed instant (a page's Date is part of its seeded episode) and pauses an hour
        // on: pausing at a time the running clock has already passed is an error.
        await page.clock.install({ time: VIRTUAL_CLOCK_START_MS });
        await page.clock.pauseAt(VIRTUAL_CLOCK_START_MS + 3_600_000);
      }
    } catch (err) {
      await context.close().catch(() => undefined);
      throw err;
    }
    // Bounds every playwright action (click, fill, ...) on this page.
    page.setDefaultTimeout(options.timeoutMs);
    const chromiumPage = new ChromiumPage(context, page, blocked, () => this.restart(), () => this.pageClosed());
    own();
    try {
      await withTimeout(page.goto(options.url, { waitUntil: 'load', timeout: options.timeoutMs }), options.timeoutMs + 500, 'loading the page');
      await withTimeout(page.evaluate(bridgeCall('setScreen', options.screenLines)), options.timeoutMs, 'starting the page');
    } catch (err) {
      await chromiumPage.close();
      throw err;
    }
    return chromiumPage;
  }

  /** Kills the browser (a hung renderer would not let its context close); the next episode launches a new one. */
  async restart(): Promise<void> {
    const current = this.browser;
    this.browser = undefined;
    const browser = await current?.catch(() => undefined);
    await withTimeout(browser?.close() ?? Promise.resolve(), CLOSE_TIMEOUT_MS, 'closing Chromium').catch(() => undefined);
  }

  async close(): Promise<void> {
    clearTimeout(this.idleTimer);
    await this.restart();
  }
}

/** Response headers the browser must not get from a proxied answer: the body is re-framed by Playwright. */
const HOP_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'proxy-authenticate', 'trailer', 'upgrade']);
const MAX_REDIRECTS = 10;
/** Set by the stand-in page of a redirected navigation (see `proxied`); `settle` waits past it. */
const REDIRECT_MARK = '__esoptRedirect';

function isRedirect(status: number): boolean {
  return status >= 300 && status < 400 && status !== 304;
}

/**
 * One request of a user's app, made by esopt through the proxy's fetch and answered to the page. A refusal (an
 * address the policy forbids, a body past the cap, a timeout) aborts the request and is listed as blocked.
 *
 * Redirects never reach Chromium as redirects: a request Chromium follows from a fulfilled 3xx is not routed
 * again, so it would leave unchecked. A redirect to an origin not allowed is blocked here. One that stays
 * allowed is, for a navigation, answered by a stand-in page of esopt's own that sets REDIRECT_MARK and
 * `location.replace`s to the target — a fresh, routed request, with the URL the app meant — and, for any other
 * request (fetch, images, scripts), followed here, each hop checked the same way.
 */
async function proxied(route: Route, proxy: NonNullable<OpenPageOptions['proxy']>, origin: string, blocked: string[]): Promise<void> {
  const request = route.request();
  try {
    const headers = { ...(await request.allHeaders()) };
    for (const name of Object.keys(headers)) if (name.startsWith(':') || name === 'host') delete headers[name];
    let url = request.url();
    let method = request.method();
    let body: Uint8Array | undefined = request.postDataBuffer() ?? undefined;
    let at = origin;
    const cookies: string[] = [];
    for (let hop = 0; ; hop++) {
      const sent = { ...headers };
      // The app's own Authorization (a page that logs in) wins over the evaluation's key.
      for (const [name, value] of Object.entries(proxy.headers(at))) if (sent[name] === undefined) sent[name] = value;
      const res = await proxy.fetch(url, { method, headers: sent, ...(body ? { body } : {}) });
      cookies.push(...res.headers.getSetCookie());
      if (isRedirect(res.status)) {
        const target = new URL(res.headers.get('location') ?? '', url);
        if (!proxy.origins.includes(target.origin) || hop >= MAX_REDIRECTS) {
          blocked.push(target.href);
          await route.abort('blockedbyclient').catch(() => undefined);
          return;
        }
        if (request.isNavigationRequest()) {
          const html = `<!doctype html><script>window.${REDIRECT_MARK} = ${JSON.stringify(target.href)}; location.replace(window.${REDIRECT_MARK});</script>`;
          await route.fulfill({ status: 200, headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...(cookies.length ? { 'set-cookie': cookies.join('\n') } : {}) }, body: html });
          return;
        }
        // As browsers do: 303, and 301/302 after a POST, go on as a GET without a body; 307/308 repeat the request.
        if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
          method = 'GET';
          body = undefined;
          delete headers['content-type'];
        }
        if (cookies.length) headers.cookie = [headers.cookie, ...cookies.map((c) => c.split(';')[0]!)].filter(Boolean).join('; ');
        url = target.href;
        at = target.origin;
        continue;
      }
      const answer: Record<string, string> = {};
      res.headers.forEach((value, name) => {
        if (!HOP_HEADERS.has(name) && name !== 'set-cookie') answer[name] = value;
      });
      if (cookies.length > 0) answer['set-cookie'] = cookies.join('\n');
      await route.fulfill({ status: res.status, headers: answer, body: Buffer.from(await res.arrayBuffer()) });
      return;
    }
  } catch {
    blocked.push(request.url());
    await route.abort('failed').catch(() => undefined);
  }
}

/**
 * A call into the page's bridge as an expression string: the arguments travel as JSON, and no Node
 * function source (which a TypeScript transform may have rewritten) is shipped to the page.
 */
function bridgeCall(method: string, ...args: unknown[]): string {
  return `window.__esopt.${method}(${args.map((a) => JSON.stringify(a ?? null)).join(', ')})`;
}

const MARKS_ON = String.raw`(() => {
  const layer = document.createElement('div');
  layer.id = '__esopt_marks';
  layer.style.cssText = 'position:fixed;inset:0;pointer-events:none;z-index:2147483647';
  for (const el of document.querySelectorAll('[data-esopt-id]')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || r.bottom < 0 || r.top > innerHeight) continue;
    const tag = document.createElement('span');
    tag.textContent = el.getAttribute('data-esopt-id');
    tag.style.cssText = 'position:fixed;font:bold 11px monospace;background:#ffeb3b;color:#000;border:1px solid #000;padding:0 2px;left:' + Math.max(0, r.left) + 'px;top:' + Math.max(0, r.top - 12) + 'px';
    layer.appendChild(tag);
  }
  document.documentElement.appendChild(layer);
})()`;
/** Marks the element at viewport point (x, y) and says where in it the point is; null where there is none. */
const CLICK_TARGET = (x: number, y: number) => `(() => {
  const el = document.elementFromPoint(${x}, ${y});
  if (!el) return null;
  const r = el.getBoundingClientRect();
  el.setAttribute('data-esopt-click-target', '');
  return { dx: ${x} - r.left, dy: ${y} - r.top };
})()`;
const MARKS_OFF = `document.getElementById('__esopt_marks')?.remove()`;

class ChromiumPage implements WebPage {
  private closed = false;

  constructor(
    private readonly context: BrowserContext,
    private readonly page: Page,
    readonly blockedRequests: string[],
    private readonly restartBrowser: () => Promise<void>,
    private readonly onClosed: () => void,
  ) {}

  /**
   * Evaluates a reading of the page. An input event may have started a navigation that Playwright did not wait
   * for (a mouse click at coordinates, Enter in a form): the page being read is then destroyed under the call,
   * so the reading waits for the next page to load and is made again there (a few times at most).
   */
  private async read(expression: string): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.page.evaluate(expression);
      } catch (err) {
        if (attempt >= 3 || !(err instanceof Error) || !/Execution context was destroyed|navigat/i.test(err.message)) throw err;
        await this.page.waitForLoadState('load');
      }
    }
  }

  observe(): Promise<string> {
    return this.read(bridgeCall('observe')) as Promise<string>;
  }

  verdict(): Promise<PageVerdict> {
    return this.read(bridgeCall('result')) as Promise<PageVerdict>;
  }

  axtree(maxLines: number): Promise<string> {
    return this.read(bridgeCall('axtree', maxLines)) as Promise<string>;
  }

  async screenshot(marks: boolean): Promise<Uint8Array> {
    if (!marks) return new Uint8Array(await this.page.screenshot({ type: 'png', animations: 'disabled', caret: 'initial' }));
    // Each element with an id gets a small label at its top-left corner, drawn for the picture and removed after.
    await this.read(MARKS_ON);
    try {
      return new Uint8Array(await this.page.screenshot({ type: 'png', animations: 'disabled', caret: 'initial' }));
    } finally {
      await this.page.evaluate(MARKS_OFF).catch(() => undefined);
    }
  }

  evaluate(expression: string): Promise<unknown> {
    return this.read(expression);
  }

  advanceClock(ms: number): Promise<void> {
    return this.page.clock.runFor(ms);
  }

  async settle(timeoutMs: number): Promise<void> {
    const until = Date.now() + timeoutMs;
    const left = () => Math.max(1, until - Date.now());
    // Past any stand-in page of a redirected navigation (`proxied`), to the page it goes on to.
    for (let i = 0; i <= MAX_REDIRECTS; i++) {
      await this.page.waitForLoadState('load', { timeout: left() });
      // undefined: the page navigated away while being asked; the next round waits for it.
      const next = await this.page.evaluate(`window.${REDIRECT_MARK} || null`).catch(() => undefined);
      if (next === null) return;
      if (typeof next === 'string') await this.page.waitForURL((u) => u.href === next, { timeout: left(), waitUntil: 'load' });
    }
  }

  async perform(action: Exclude<WebAction, { kind: 'done' }>): Promise<string | null> {
    switch (action.kind) {
      case 'noop':
        return null;
      case 'click-at': {
        const size = this.page.viewportSize();
        if (size && (action.x < 0 || action.y < 0 || action.x >= size.width || action.y >= size.height)) return `(${action.x}, ${action.y}) is outside the ${size.width}×${size.height} screenshot`;
        // Clicked as the element under the point, so Playwright waits for a navigation the click starts (a form's
        // submit), as it does for a click on an id; a bare mouse click would leave the next reading racing it.
        const offset = (await this.page.evaluate(CLICK_TARGET(action.x, action.y))) as { dx: number; dy: number } | null;
        if (!offset) {
          await this.page.mouse.click(action.x, action.y);
          return null;
        }
        try {
          await this.page.locator('[data-esopt-click-target]').click({ position: { x: offset.dx, y: offset.dy } });
        } finally {
          await this.page.evaluate(`document.querySelector('[data-esopt-click-target]')?.removeAttribute('data-esopt-click-target')`).catch(() => undefined);
        }
        return null;
      }
      case 'type-focused':
        await this.page.keyboard.type(action.text);
        return null;
      case 'press-on': {
        const problem = (await this.page.evaluate(bridgeCall('check', 'focus', action.id, null))) as string | null;
        if (problem) return problem;
        await this.page.locator(`[data-esopt-id="${action.id}"]`).press(action.key);
        return null;
      }
    }
    const id = 'id' in action ? action.id : null;
    const arg = action.kind === 'scroll' ? action.direction : action.kind === 'press' ? action.key : 'text' in action ? action.text : null;
    const problem = (await this.page.evaluate(bridgeCall('check', action.kind, id, arg))) as string | null;
    if (problem) return problem;
    const target = () => this.page.locator(`[data-esopt-id="${id}"]`);
    switch (action.kind) {
      case 'scroll':
        await this.page.evaluate(bridgeCall('scroll', action.direction));
        await this.page.mouse.wheel(0, action.direction === 'down' ? 400 : -400);
        break;
      case 'press':
        // On the focused element when there is one, so a key that submits its form is waited out like a click.
        if (await this.page.evaluate(`document.activeElement !== null && document.activeElement !== document.body`)) await this.page.locator(':focus').press(action.key);
        else await this.page.keyboard.press(action.key);
        break;
      case 'click':
        await target().click();
        break;
      case 'check':
        await target().check();
        break;
      case 'type':
        await target().fill(action.text);
        break;
      case 'select':
        await target().selectOption({ label: action.text });
        break;
    }
    return null;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await withTimeout(this.context.close(), CLOSE_TIMEOUT_MS, 'closing the browser context');
    } catch {
      await this.restartBrowser();
    } finally {
      this.onClosed();
    }
  }
}
