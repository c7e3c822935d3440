/** Shared by the API tests: a real local API on a loopback port over a temporary store, and a client. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { RunConfigInput } from '../../shared/schemas/index.ts';
import { startLocalApi, type RunningApi } from '../../trainer/jobs/local-api.ts';

export const TOKEN = 'test-token-5b1f0c9e';

/** The smallest real run: the tiny preset on 4×4 sudoku, two members, a few seconds on one core. */
export function tinyRunConfig(overrides: Partial<RunConfigInput> = {}): RunConfigInput {
  return {
    name: 'tiny',
    environment: { name: 'sudoku', options: { size: 4, blanks: 2, shapedReward: true } },
    tasks: { seed: 1, trainPerIteration: 1, evalCount: 2 },
    model: { preset: 'tiny', seed: 0 },
    es: { population: 2, sigma: 0.02, alpha: 0.01 },
    generation: { temperature: 0.7, topP: 1, topK: 0, maxTokens: 8 },
    iterations: 3,
    evalInterval: 2,
    checkpointInterval: 2,
    workers: 2,
    deadlineMs: 60_000,
    ...overrides,
  };
}

export interface TestApi extends RunningApi {
  storeRoot: string;
  /** Every line the API logged (pino JSON). */
  logs: string[];
  call(method: string, path: string, init?: { body?: unknown; headers?: Record<string, string>; token?: string | null }): Promise<{ status: number; body: any; headers: Headers }>;
  dispose(): Promise<void>;
}

export async function startTestApi(storeRoot = mkdtempSync(join(tmpdir(), 'esopt-api-')), prices?: Parameters<typeof startLocalApi>[0]['prices']): Promise<TestApi> {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      logs.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const api = await startLocalApi({ storeRoot, token: TOKEN, log: pino({ level: 'info' }, sink), eventPollMs: 50, trainingPollMs: 20, workers: 2, prices });
  const call: TestApi['call'] = async (method, path, init = {}) => {
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (init.token !== null) headers.authorization = `Bearer ${init.token ?? TOKEN}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
    }
    const res = await fetch(`${api.url}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON (HTML, SSE): keep the text
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
  return {
    ...api,
    storeRoot,
    logs,
    call,
    dispose: async () => {
      await api.close();
      rmSync(storeRoot, { recursive: true, force: true });
    },
  };
}

/** Polls until `check` returns a value (not undefined), or fails after `timeoutMs`. */
export async function waitFor<T>(check: () => Promise<T | undefined>, timeoutMs = 60_000, what = 'condition'): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Reads an SSE response to its end: the parsed `data:` of every event, with its `event:` name. */
export async function readSse(res: Response): Promise<Array<{ event: string; data: any }>> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((b) => b.trim())
    .map((block) => {
      const lines = block.split('\n');
      return {
        event: lines.find((l) => l.startsWith('event:'))?.slice(6).trim() ?? '',
        data: JSON.parse(lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n')),
      };
    });
}
