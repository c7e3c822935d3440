/**
 * The CLI's client of the esopt HTTP API: `--api URL` (default $ESOPT_API or http://127.0.0.1:8787), the
 * bearer token from $ESOPT_TOKEN, responses parsed with the API's own schemas, errors as one line with
 * the server's field paths, and the run's SSE stream as an async iterator of RunEvents.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ApiError, RunEvent } from '../../shared/schemas/index.ts';
import { flag, type Parsed } from './argv/args.ts';
import { UsageError } from './argv/usage-error.ts';

export const DEFAULT_API = 'http://127.0.0.1:8787';

/** The `--api` flag every API command takes. */
export const apiFlags = { api: { type: 'string' } } as const;

function jsonOrNull(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export class ApiClient {
  constructor(
    readonly baseUrl: string,
    private readonly token: string,
  ) {}

  static fromFlags(values: Parsed['values'], env: NodeJS.ProcessEnv = process.env): ApiClient {
    const url = flag(values, 'api', z.url().optional()) ?? env.ESOPT_API ?? DEFAULT_API;
    const token = env.ESOPT_TOKEN;
    if (!token) throw new UsageError('set ESOPT_TOKEN to the API token');
    return new ApiClient(url.replace(/\/+$/, ''), token);
  }

  private async request(method: string, path: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<Response> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token}`, ...extraHeaders };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      // One key per command invocation: a retried request can never create a second run.
      headers['Idempotency-Key'] = randomUUID();
    }
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (err) {
      throw new Error(`cannot reach the API at ${this.baseUrl}: ${(err as Error).cause ?? (err as Error).message}`);
    }
    if (!res.ok) {
      const text = await res.text();
      const parsed = ApiError.safeParse(jsonOrNull(text));
      const message = parsed.success ? (parsed.data.error.issues?.length ? parsed.data.error.issues.map((i) => `${i.path}: ${i.message}`).join('; ') : parsed.data.error.message) : text.slice(0, 500);
      throw new Error(`${method} ${path} → HTTP ${res.status}: ${message}`);
    }
    return res;
  }

  /** A GET whose answer the caller reads itself (a status code, a body to stream); errors as `get`'s. */
  raw(path: string, headers: Record<string, string> = {}): Promise<Response> {
    return this.request('GET', path, undefined, headers);
  }

  async get<S extends z.ZodType>(path: string, schema: S): Promise<z.infer<S>> {
    return schema.parse(await (await this.request('GET', path)).json());
  }

  async post<S extends z.ZodType>(path: string, body: unknown, schema: S, headers: Record<string, string> = {}): Promise<z.infer<S>> {
    return schema.parse(await (await this.request('POST', path, body ?? {}, headers)).json());
  }

  /** The server-sent events of a run until the stream ends (after the `end` event). */
  /**
   * The run's events to its `end`. A stream the server ends early (the Lambda API closes each one after a
   * window) is resumed with Last-Event-ID after the `retry:` it asked for, so nothing repeats or is missed.
   */
  async *events(run: string): AsyncGenerator<RunEvent> {
    let lastId: string | undefined;
    let retryMs = 1000;
    for (;;) {
      const res = await this.request('GET', `/runs/${encodeURIComponent(run)}/events`, undefined, lastId ? { 'Last-Event-ID': lastId } : {});
      if (!res.body) return;
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let at: number;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          const lines = buffer.slice(0, at).split('\n');
          buffer = buffer.slice(at + 2);
          const field = (name: string) => lines.filter((l) => l.startsWith(`${name}:`)).map((l) => l.slice(name.length + 1).trimStart());
          const data = field('data').join('\n');
          lastId = field('id').at(-1) ?? lastId;
          const retry = Number(field('retry').at(-1));
          if (Number.isInteger(retry) && retry >= 0) retryMs = retry;
          if (!data) continue;
          const event = RunEvent.parse(JSON.parse(data));
          yield event;
          if (event.type === 'end') return;
        }
      }
      await new Promise((resolve) => setTimeout(resolve, retryMs));
    }
  }
}

/** The one positional id of `runs show|stop|watch <id>` and `evals show <id>`. */
export function idArgument(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`give exactly one ${what} id`);
  const r = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/).safeParse(positionals[0]);
  if (!r.success) throw new UsageError(`not a valid ${what} id: ${JSON.stringify(positionals[0])}`);
  return r.data;
}
