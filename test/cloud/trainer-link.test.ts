/**
 * The trainer link: HTTPS with a certificate the Episode function pins. Two loopback HTTPS servers speak
 * chat completions, each with its own self-signed identity; the client pinned to one talks to it, and
 * a server with any other certificate is refused during the handshake, before a request (or the bearer
 * token) is sent. The Episode handler pins whatever certificate the box published in the store.
 */
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEpisodeHandler } from '../../functions/episode.ts';
import { storeCertificateSource } from '../../functions/trainer-certificate.ts';
import { HttpPolicy } from '../../environments/policies/http-client.ts';
import { keys } from '../../shared/keys.ts';
import { RewardRecord } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { createTlsIdentity, publishCertificate, type TlsIdentity } from '../../trainer/server/tls-identity.ts';
import { sudokuRequests } from './helpers/sudoku-plan.ts';

interface Box {
  identity: TlsIdentity;
  url: string;
  seen: string[];
  server: ServerType;
}

async function box(): Promise<Box> {
  const identity = await createTlsIdentity(['127.0.0.1']);
  const seen: string[] = [];
  const app = new Hono();
  app.post('/v1/chat/completions', (c) => {
    seen.push(c.req.header('authorization') ?? '');
    return c.json({ choices: [{ message: { content: 'place 9 9 9' } }], usage: { prompt_tokens: 3, completion_tokens: 2 } });
  });
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0, createServer, serverOptions: { key: identity.key, cert: identity.cert } }, () => resolve(s));
  });
  return { identity, seen, server, url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

let a: Box;
let b: Box;
const ask = (policy: HttpPolicy) => policy.act([{ role: 'user', content: 'hi' }], { step: 0 });

beforeAll(async () => {
  [a, b] = await Promise.all([box(), box()]);
});
afterAll(async () => {
  for (const x of [a, b]) if (x) await new Promise((r) => x.server.close(r));
});

describe('the pinned trainer link', () => {
  it('talks to the server whose certificate is pinned, and refuses any other before sending the token', async () => {
    const pinnedToA = { certificate: a.identity.cert, sha256: a.identity.sha256 };
    const reply = await ask(new HttpPolicy({ baseUrl: a.url, model: 'base', token: 'secret-token', pinnedCertificate: pinnedToA }));
    expect(reply.text).toBe('place 9 9 9');
    expect(a.seen).toEqual(['Bearer secret-token']);
    // B has a valid certificate of its own, at the same host: the pin refuses it, and it is not retried.
    await expect(ask(new HttpPolicy({ baseUrl: b.url, model: 'base', token: 'secret-token', pinnedCertificate: pinnedToA, retries: 3 }))).rejects.toThrow(/is not the pinned/);
    // Pinned to B's fingerprint with A's certificate as anchor: B's chain does not verify either.
    await expect(ask(new HttpPolicy({ baseUrl: b.url, model: 'base', pinnedCertificate: { certificate: a.identity.cert, sha256: b.identity.sha256 }, retries: 0 }))).rejects.toThrow();
    expect(b.seen).toEqual([]);
    // Without a pin, node's fetch does not trust a self-signed certificate at all.
    await expect(ask(new HttpPolicy({ baseUrl: a.url, model: 'base', retries: 0 }))).rejects.toThrow(/certificate/);
    expect(() => new HttpPolicy({ baseUrl: 'http://127.0.0.1:9/v1', model: 'base', pinnedCertificate: pinnedToA })).toThrow(/needs an https baseUrl/);
  });

  it('the Episode handler pins the certificate the box published in the store', async () => {
    const store = new FsObjectStore(mkdtempSync(join(tmpdir(), 'esopt-link-')));
    const handle = (url: string) =>
      createEpisodeHandler({
        store,
        env: { ESOPT_TRAINER_TOKEN: 'box-token' },
        tokenOrigins: [new URL(url).origin],
        trainerCertificate: storeCertificateSource(store, url),
        memoryMb: 1024,
        billedPerInvocation: true,
        log: { info() {}, error() {} },
      });
    const record = async (run: string) => {
      const [request] = await sudokuRequests({ run, members: 1, tasks: 1, baseUrl: a.url, tokenEnv: 'ESOPT_TRAINER_TOKEN' });
      await handle(a.url)(request);
      return RewardRecord.parse(JSON.parse(new TextDecoder().decode((await store.get(keys.reward(run, 0, 0, request.task.id)))!)));
    };
    // Nothing published yet: the episode fails, naming the missing certificate; nothing reached the box.
    const before = a.seen.length;
    expect((await record('unpublished')).error).toMatch(/has not published its certificate \(trainer\/certificate\.json\)/);
    expect(a.seen.length).toBe(before);
    await publishCertificate(store, a.identity);
    const ok = await record('published');
    expect(ok.error).toBeNull();
    expect(ok.steps).toBeGreaterThan(0);
    expect(a.seen.slice(before).every((h) => h === 'Bearer box-token')).toBe(true);
    // The box restarted with a new certificate (B's published) while A still answers at that address: refused.
    await publishCertificate(store, b.identity);
    const seenBefore = a.seen.length;
    expect((await record('republished')).error).toMatch(/is not the pinned/);
    expect(a.seen.length).toBe(seenBefore);
  });
});
