/**
 * The fuzz past the door for environments that reach outside. (1) Near-valid run bodies of the `rollout` kind
 * against the deployed-mode API: every answer 2xx or 4xx, and every accepted request is safe to run — no
 * `command` anywhere in its options, no `keyEnv`, and every endpoint URL one a deployed Episode function may
 * call. (2) A hostile rollout agent answering fuzzed bodies (random JSON, near-valid answers, garbage, huge):
 * every episode ends with a finite reward, and a failed one names a fixed reason that never carries the body.
 */
import fc from 'fast-check';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { RunConfig } from '../../shared/schemas/index.ts';
import { readJson } from '../../shared/store/json.ts';
import { checkUrl, EMBEDDED_OUTBOUND, PUBLIC_ONLY } from '../../environments/outbound/address-policy.ts';
import { playRollout } from '../../environments/rollout/play.ts';
import { tinyRunConfig } from '../api/helpers.ts';
import { apiOverTempStore, type FuzzedApi } from './helpers/api-app.ts';
import { bodyText, fuzzBody, type Json } from './helpers/fuzz-bodies.ts';

const TOKEN = 'fuzz-token-0123456789abcdef';

function commandsIn(value: unknown, depth = 0): number {
  if (depth > 10 || value === null || typeof value !== 'object') return 0;
  return Object.entries(value).reduce((n, [k, v]) => n + (k === 'command' && !Array.isArray(value) ? 1 : 0) + commandsIn(v, depth + 1), 0);
}
function urlsIn(value: unknown, depth = 0): string[] {
  if (depth > 10 || value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([k, v]) => (k === 'url' && typeof v === 'string' ? [v] : urlsIn(v, depth + 1)));
}

describe('fuzz past the door: rollout runs on a deployed API', () => {
  let api: FuzzedApi;
  beforeAll(() => {
    api = apiOverTempStore(TOKEN);
  });
  afterAll(() => api.dispose());

  it('accepts only requests that are safe to run: no command, no keyEnv, every URL callable from a stack', async () => {
    const valid = tinyRunConfig({ environment: { name: 'rollout', options: { url: 'https://agent.example.com/rollout', timeoutMs: 60_000 } }, localEpisodes: 'worker-processes', iterations: 1 }) as unknown as Json;
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fuzzBody(valid), async (body) => {
        const res = await api.app.request('/runs', { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: bodyText(body) });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        expect(res.status).toBeLessThan(500);
        if (res.status !== 201) return;
        const { id } = (await res.json()) as { id: string };
        const config = (await readJson(api.store, keys.config(id), RunConfig))!;
        if (config.environment.name !== 'rollout') return;
        expect(commandsIn(config.environment.options)).toBe(0);
        expect(config.environment.keyEnv).toBeUndefined();
        for (const url of urlsIn(config.environment.options)) expect(() => checkUrl(new URL(url), PUBLIC_ONLY), url).not.toThrow();
      }),
      { numRuns: 400 },
    );
    expect(statuses.get(201) ?? 0).toBeGreaterThan(0);
    expect(statuses.get(400) ?? 0).toBeGreaterThan(0);
  }, 60_000);
});

describe('fuzz the rollout protocol: a hostile agent', () => {
  let server: Server;
  let url = '';
  let next: { status: number; body: string } = { status: 200, body: '{}' };
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(next.status, { 'content-type': 'application/json' }).end(next.body));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/rollout`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('ends every episode with a finite reward, and a failure with a fixed reason, never the body', async () => {
    const answer = fc.oneof(
      fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
      fc.record({ reward: fc.oneof(fc.double(), fc.string(), fc.constant(null)), info: fc.option(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 }))) }).map((v) => JSON.stringify(v)),
      fc.string({ maxLength: 300 }),
      fc.nat({ max: 200_000 }).map((n) => JSON.stringify({ reward: 1, info: { pad: 'MARKER'.repeat(n / 6) } })),
    );
    await fc.assert(
      fc.asyncProperty(answer, fc.constantFrom(200, 200, 200, 201, 400, 500, 503), fc.nat({ max: 2 }), async (body, status, calls) => {
        next = { status, body };
        const result = await playRollout({
          task: { seed: 1 },
          options: { url, timeoutMs: 5_000 },
          seed: 1,
          grant: { baseUrl: 'http://127.0.0.1:9/v1', model: 'base', apiKey: 'esr_x' },
          usage: async () => ({ calls, promptTokens: calls * 3, completionTokens: calls }),
          context: { outbound: EMBEDDED_OUTBOUND, allowCommands: false },
          deadline: Date.now() + 10_000,
        });
        expect(Number.isFinite(result.reward)).toBe(true);
        if (result.error === null) {
          expect(status).toBeLessThan(300);
          expect(calls).toBeGreaterThan(0);
        } else {
          expect(result.reward).toBe(0);
          if (body.length > 20) expect(result.error).not.toContain(body.slice(0, 20));
        }
      }),
      { numRuns: 300 },
    );
  }, 60_000);
});
