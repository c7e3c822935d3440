/**
 * JSON over HTTP for the tracking servers (MLflow, Weights & Biases): each try bounded by a timeout, a few
 * retries for what may pass (network errors, timeouts, 429, 5xx) with a short backoff, and errors that name
 * the method, the URL's path and the status, never a header (the credentials travel only there).
 */

export interface HttpOptions {
  /** Each try's limit (default 10 s). */
  timeoutMs?: number;
  /** Tries after the first (default 2). */
  retries?: number;
  /** The first backoff; doubled per retry (default 500 ms). */
  backoffMs?: number;
}

export class HttpError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    readonly body: unknown,
  ) {
    super(message);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What an error says about where it went: no query string, no user info. */
function where(method: string, url: string): string {
  const u = new URL(url);
  return `${method} ${u.origin}${u.pathname}`;
}

function retriable(status: number): boolean {
  return status === 429 || status >= 500;
}

/** The response's JSON (null for an empty body). A non-2xx answer throws an HttpError with its parsed body. */
export async function requestJson(method: 'GET' | 'POST', url: string, headers: Record<string, string>, body: unknown, o: HttpOptions = {}): Promise<unknown> {
  const timeoutMs = o.timeoutMs ?? 10_000;
  const retries = o.retries ?? 2;
  const backoffMs = o.backoffMs ?? 500;
  let last: Error = new Error('no try made');
  for (let attempt = 0; attempt <= retries; attempt++) {
    if (attempt > 0) await sleep(backoffMs * 2 ** (attempt - 1));
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, {
        method,
        headers: { accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      text = await res.text();
    } catch (err) {
      const reason = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError') ? `no answer within ${timeoutMs} ms` : (err as Error)?.message ?? String(err);
      last = new HttpError(`${where(method, url)}: ${reason}`, null, null);
      continue;
    }
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = text;
    }
    if (res.ok) return parsed;
    const snippet = (typeof parsed === 'string' ? parsed : JSON.stringify(parsed)).slice(0, 300);
    last = new HttpError(`${where(method, url)}: HTTP ${res.status}${snippet ? ` ${snippet}` : ''}`, res.status, parsed);
    if (!retriable(res.status)) throw last;
  }
  throw last;
}
