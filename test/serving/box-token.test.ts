/**
 * The trainer box's token while it rotates: which tokens are accepted when (AcceptedTokens, on a given
 * clock), how the follower reads the parameter (periodically, and after a miss no sooner than its interval,
 * one read shared by every caller that missed), and the gate on the public port in front of a real server.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it, onTestFinished } from 'vitest';
import { AcceptedTokens } from '../../trainer/serving/accepted-tokens.ts';
import { TokenFollower } from '../../trainer/serving/token-follower.ts';
import { startTokenGate } from '../../trainer/serving/token-gate.ts';
import { freeLoopbackPort } from '../../trainer/serving/free-port.ts';

describe('AcceptedTokens', () => {
  it('accepts the previous token for the grace after a change is seen, then only the current one', () => {
    const t = new AcceptedTokens('old-token', 1000);
    expect(t.accepts('old-token', 0)).toBe(true);
    expect(t.accepts('new-token', 0)).toBe(false);
    expect(t.see('old-token', 5)).toBe(false);
    expect(t.see('new-token', 10)).toBe(true);
    expect(t.graceEndsAt(10)).toBe(1010);
    expect(t.accepts('new-token', 11)).toBe(true);
    expect(t.accepts('old-token', 1009)).toBe(true);
    expect(t.accepts('old-token', 1010)).toBe(false);
    expect(t.accepts('new-token', 1010)).toBe(true);
    expect(t.graceEndsAt(1010)).toBeNull();
    // A second change inside the grace drops the oldest token at once.
    const u = new AcceptedTokens('a-token', 1000);
    u.see('b-token', 0);
    u.see('c-token', 10);
    expect([u.accepts('a-token', 11), u.accepts('b-token', 11), u.accepts('c-token', 11)]).toEqual([false, true, true]);
    expect(u.accepts('', 11)).toBe(false);
  });

  it('refuses what it cannot use: an empty token, a negative grace', () => {
    expect(() => new AcceptedTokens('', 10)).toThrow(/initial token is empty/);
    expect(() => new AcceptedTokens('x', -1)).toThrow(/graceMs/);
    expect(() => new AcceptedTokens('x', 10).see('', 0)).toThrow(/token read is empty/);
  });
});

describe('TokenFollower', () => {
  it('reads at start and every refreshMs; a failed or empty read keeps the tokens', async () => {
    let value: string | null = 'old-token';
    let fail = false;
    let reads = 0;
    const f = new TokenFollower({ initial: 'old-token', refreshMs: 30, graceMs: 60_000, read: async () => (reads++, fail ? Promise.reject(new Error('throttled')) : value) });
    onTestFinished(() => f.close());
    f.start();
    await new Promise((r) => setTimeout(r, 100));
    expect(reads).toBeGreaterThanOrEqual(3);
    value = 'new-token';
    await f.refresh();
    expect(await f.accepts('new-token')).toBe(true);
    expect(await f.accepts('old-token')).toBe(true);
    fail = true;
    await f.refresh();
    value = null;
    fail = false;
    await f.refresh();
    expect(await f.accepts('new-token')).toBe(true);
  });

  it('a miss waits for one read no sooner than missRefreshMs after the last, shared by every caller that missed', async () => {
    let value = 'old-token';
    let reads = 0;
    const f = new TokenFollower({ initial: 'old-token', missRefreshMs: 200, graceMs: 0, read: async () => (reads++, value) });
    await f.refresh();
    expect(reads).toBe(1);
    value = 'new-token';
    const started = Date.now();
    const answers = await Promise.all([f.accepts('new-token'), f.accepts('new-token'), f.accepts('wrong-token')]);
    expect(answers).toEqual([true, true, false]);
    expect(reads).toBe(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    // Grace 0: the old token is refused as soon as the change is seen.
    expect(await f.accepts('old-token')).toBe(false);
  });
});

describe('the token gate', () => {
  async function upstream(): Promise<{ port: number; seen: { url: string; authorization?: string }[] }> {
    const seen: { url: string; authorization?: string }[] = [];
    const port = await freeLoopbackPort();
    const server: Server = createServer((req, res) => {
      seen.push({ url: req.url ?? '', authorization: req.headers.authorization });
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        res.writeHead(req.url === '/slow' ? 202 : 200, { 'content-type': 'text/plain' });
        res.write('part one;');
        setTimeout(() => res.end(`echo:${body}`), 20);
      });
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
    return { port, seen };
  }

  it('checks the token, then passes the request to the server with its own token; 503 with no server; /healthz is open', async () => {
    const up = await upstream();
    const accepted = new Set(['right-token']);
    const gate = await startTokenGate({ host: '127.0.0.1', port: 0, tokens: { accepts: async (t) => accepted.has(t) }, upstream: { port: up.port, token: 'inner-token' } });
    onTestFinished(() => gate.close());
    const url = `http://127.0.0.1:${gate.port}`;
    const refused = await fetch(`${url}/v1/models`, { headers: { authorization: 'Bearer wrong-token' } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toBe('Bearer');
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    expect((await fetch(`${url}/v1/models`)).status).toBe(401);
    expect(up.seen).toEqual([]);

    const passed = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer right-token' }, body: 'hello' });
    expect(passed.status).toBe(200);
    expect(await passed.text()).toBe('part one;echo:hello');
    expect(up.seen).toEqual([{ url: '/v1/chat/completions', authorization: 'Bearer inner-token' }]);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);

    const none = await startTokenGate({ host: '127.0.0.1', port: 0, tokens: { accepts: async () => true }, upstream: { port: await freeLoopbackPort(), token: 'x' } });
    onTestFinished(() => none.close());
    const unavailable = await fetch(`http://127.0.0.1:${none.port}/v1/models`, { headers: { authorization: 'Bearer any' } });
    expect(unavailable.status).toBe(503);
    expect(unavailable.headers.get('retry-after')).toBe('1');
  });
});
