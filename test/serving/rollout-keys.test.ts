/**
 * Rollout keys on the real inference server (tiny ONNX engine, real HTTP), directly and through the box's
 * token gate: a key is issued only with the server's token, opens chat completions of its own model only
 * (whatever model the request names), counts the calls and tokens it was served, and stops at expiry or
 * revocation; the table stays bounded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask } from '../../shared/es.ts';
import type { Engine } from '../../trainer/engine/engine.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { RolloutKeys } from '../../trainer/serving/rollout-keys.ts';
import { startInferenceServer, type RunningServer } from '../../trainer/serving/server.ts';
import { startTokenGate } from '../../trainer/serving/token-gate.ts';

let engine: Engine;
let server: RunningServer;
const TOKEN = 'server-token-0123456789';
const auth = (t: string) => ({ authorization: `Bearer ${t}`, 'content-type': 'application/json' });

beforeAll(async () => {
  engine = await createEngine({ model: { preset: 'tiny', seed: 0 }, mode: 'full' });
  server = await startInferenceServer(engine, { token: TOKEN });
  server.service.setPopulation({ runSeed: 5, iteration: 2, sigma: 0.05, rank: 1, members: ask({ population: 4, antithetic: true }) });
});
afterAll(async () => {
  await server.close();
  await engine.close();
});

async function issue(base: string, model: string, expiresInMs = 60_000, token = TOKEN): Promise<Response> {
  return fetch(`${base}/v1/rollouts`, { method: 'POST', headers: auth(token), body: JSON.stringify({ model, expiresInMs }) });
}
function chat(base: string, key: string, model = 'whatever-the-agent-says'): Promise<Response> {
  return fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: auth(key), body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, temperature: 0 }) });
}

describe('rollout keys', () => {
  it('are issued with the token only, for a model the server serves', async () => {
    expect((await issue(server.url, 'member-2-1', 60_000, 'wrong')).status).toBe(401);
    expect((await issue(server.url, 'member-9-1')).status).toBe(503);
    expect((await issue(server.url, 'member-1-1')).status).toBe(409);
    const res = await issue(server.url, 'member-2-1');
    expect(res.status).toBe(201);
    const body = (await res.json()) as { id: string; key: string; model: string };
    expect(body.key).toMatch(/^esr_/);
    expect(body.model).toBe('member-2-1');
  });

  it("serve their own model only, count calls and tokens, and open nothing else", async () => {
    const { id, key } = (await (await issue(server.url, 'member-2-3')).json()) as { id: string; key: string };
    const first = await chat(server.url, key);
    expect(first.status).toBe(200);
    const body = (await first.json()) as { model: string; usage: { prompt_tokens: number; completion_tokens: number } };
    expect(body.model).toBe('member-2-3');
    await chat(server.url, key, 'base');
    const usage = (await (await fetch(`${server.url}/v1/rollouts/${id}`, { headers: auth(TOKEN) })).json()) as { calls: number; promptTokens: number; completionTokens: number };
    expect(usage.calls).toBe(2);
    expect(usage.promptTokens).toBe(2 * body.usage.prompt_tokens);
    expect(usage.completionTokens).toBeGreaterThan(0);
    const models = (await (await fetch(`${server.url}/v1/models`, { headers: auth(key) })).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(['member-2-3']);
    // the key cannot read usage, issue keys or read metrics
    expect((await fetch(`${server.url}/v1/rollouts/${id}`, { headers: auth(key) })).status).toBe(403);
    expect((await issue(server.url, 'base', 60_000, key)).status).toBe(403);
    expect((await fetch(`${server.url}/metrics`, { headers: auth(key) })).status).toBe(403);
    // revoked: refused, and its usage is gone
    expect((await fetch(`${server.url}/v1/rollouts/${id}`, { method: 'DELETE', headers: auth(TOKEN) })).status).toBe(204);
    expect((await chat(server.url, key)).status).toBe(401);
  });

  it('stop at their expiry', async () => {
    const { key } = (await (await issue(server.url, 'base', 1_000)).json()) as { key: string };
    expect((await chat(server.url, key)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1_100));
    expect((await chat(server.url, key)).status).toBe(401);
    expect((await chat(server.url, 'esr_made-up')).status).toBe(401);
  });

  it('pass the box token gate as they came, and are checked by the server behind it', async () => {
    const gate = await startTokenGate({ host: '127.0.0.1', port: 0, tokens: { accepts: async (t) => t === 'stack-token' }, upstream: { port: Number(new URL(server.url).port), token: TOKEN } });
    try {
      const base = `http://127.0.0.1:${gate.port}`;
      const { id, key } = (await (await issue(base, 'member-2-0', 60_000, 'stack-token')).json()) as { id: string; key: string };
      expect((await chat(base, key)).status).toBe(200);
      expect((await chat(base, 'esr_forged')).status).toBe(401);
      const usage = (await (await fetch(`${base}/v1/rollouts/${id}`, { headers: auth('stack-token') })).json()) as { calls: number };
      expect(usage.calls).toBe(1);
    } finally {
      await gate.close();
    }
  });

  it('keep a bounded table: expired keys go first, then the oldest', () => {
    let now = 0;
    const keys = new RolloutKeys(3, () => now);
    const a = keys.issue('base', 10);
    const b = keys.issue('base', 1_000);
    const c = keys.issue('base', 1_000);
    now = 20;
    keys.issue('base', 1_000); // a has expired: it goes
    expect(keys.usage(a.id)).toBeNull();
    expect(keys.size).toBe(3);
    keys.issue('base', 1_000); // none expired: the oldest (b) goes
    expect(keys.usage(b.id)).toBeNull();
    expect(keys.resolve(c.key)).not.toBeNull();
  });
});
