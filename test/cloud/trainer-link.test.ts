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
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { createEpisodeHandler, EpisodeFunctionEnv } from '../../functions/episode.ts';
import { storeTrainerPins, trainerLinkFromEnv } from '../../functions/trainer-certificate.ts';
import { HttpPolicy } from '../../environments/policies/http-client.ts';
import { keys } from '../../shared/keys.ts';
import { RewardRecord, type EpisodeRequest, type ReplicaAnnouncement } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { createTlsIdentity, publishCertificate, type TlsIdentity } from '../../trainer/serving/tls-identity.ts';
import { sudokuRequests } from './helpers/sudoku-plan.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

interface Box {
  identity: TlsIdentity;
  url: string;
  /** The authorization header of every request, and the model (member) it asked for. */
  seen: string[];
  models: string[];
  server: ServerType;
}

async function box(): Promise<Box> {
  const identity = await createTlsIdentity(['127.0.0.1']);
  const seen: string[] = [];
  const models: string[] = [];
  const app = new Hono();
  app.post('/v1/chat/completions', async (c) => {
    seen.push(c.req.header('authorization') ?? '');
    models.push(((await c.req.json()) as { model: string }).model);
    return c.json({ choices: [{ message: { content: 'place 9 9 9' } }], usage: { prompt_tokens: 3, completion_tokens: 2 } });
  });
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0, createServer, serverOptions: { key: identity.key, cert: identity.cert } }, () => resolve(s));
  });
  return { identity, seen, models, server, url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
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
    const pinnedToA = { [new URL(a.url).origin]: { certificate: a.identity.cert, sha256: a.identity.sha256 } };
    const reply = await ask(new HttpPolicy({ baseUrl: a.url, model: 'base', token: 'secret-token', pinnedCertificates: pinnedToA }));
    expect(reply.text).toBe('place 9 9 9');
    expect(a.seen).toEqual(['Bearer secret-token']);
    // B has a valid certificate of its own, at the same host: the pin refuses it, and it is not retried.
    const aAtB = { [new URL(b.url).origin]: pinnedToA[new URL(a.url).origin] };
    await expect(ask(new HttpPolicy({ baseUrl: b.url, model: 'base', token: 'secret-token', pinnedCertificates: aAtB, retries: 3 }))).rejects.toThrow(/is not the pinned/);
    // Pinned to B's fingerprint with A's certificate as anchor: B's chain does not verify either.
    await expect(ask(new HttpPolicy({ baseUrl: b.url, model: 'base', pinnedCertificates: { [new URL(b.url).origin]: { certificate: a.identity.cert, sha256: b.identity.sha256 } }, retries: 0 }))).rejects.toThrow();
    // A server without a pin of its own is refused when the policy is made, fallbacks included.
    expect(() => new HttpPolicy({ baseUrl: a.url, fallbackUrls: [b.url], model: 'base', pinnedCertificates: pinnedToA })).toThrow(`no pinned certificate for ${new URL(b.url).origin}`);
    expect(b.seen).toEqual([]);
    // Without a pin, node's fetch does not trust a self-signed certificate at all.
    await expect(ask(new HttpPolicy({ baseUrl: a.url, model: 'base', retries: 0 }))).rejects.toThrow(/certificate/);
    expect(() => new HttpPolicy({ baseUrl: 'http://127.0.0.1:9/v1', model: 'base', pinnedCertificates: pinnedToA })).toThrow(/needs an https baseUrl/);
  });

  it('the Episode handler pins the certificate the box published in the store', async () => {
    const store = new FsObjectStore(mkdtempSync(join(tmpdir(), 'esopt-link-')));
    const handle = (url: string) =>
      createEpisodeHandler({
prices: measuredPrices(),
        store,
        env: { ESOPT_TRAINER_TOKEN: 'box-token' },
        tokenOrigins: [new URL(url).origin],
        trainerPins: storeTrainerPins(store, url),
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

/** What a replica box writes when it has caught up: its address and its certificate (public part only). */
async function announce(store: ObjectStore, run: string, id: string, at: Box, identity: TlsIdentity = at.identity): Promise<void> {
  const body: ReplicaAnnouncement = { id, baseUrl: at.url, tls: { certificate: identity.cert, sha256: identity.sha256 }, startedAt: new Date().toISOString() };
  await store.put(keys.replica(run, id), JSON.stringify(body));
}

describe('pinned trainer replicas', () => {
  let r1: Box;
  let r2: Box;
  let stranger: Box;
  let gone: Box;
  beforeAll(async () => {
    [r1, r2, stranger, gone] = await Promise.all([box(), box(), box(), box()]);
    // A replica that announced itself and then died: its port refuses connections.
    await new Promise((r) => gone.server.close(r));
  });
  afterAll(async () => {
    for (const x of [r1, r2, stranger]) if (x) await new Promise((r) => x.server.close(r));
  });

  it('sends each member to its replica pinned to the certificate announced for that origin, refuses the rest, and fails over', async () => {
    const store = new FsObjectStore(mkdtempSync(join(tmpdir(), 'esopt-replica-link-')));
    await publishCertificate(store, a.identity);
    const origin = (x: Box) => new URL(x.url).origin;
    // The stack's environment: the coordinator box and three replica boxes at fixed addresses (replica-3 never announces).
    const env = EpisodeFunctionEnv.parse({ ESOPT_BUCKET: 'runs', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ESOPT_TRAINER_URL: a.url, ESOPT_REPLICA_URLS: `replica-1=${r1.url},replica-2=${r2.url},replica-3=${stranger.url},replica-4=${gone.url}` });
    const link = trainerLinkFromEnv(store, env);
    expect(link.tokenOrigins).toEqual([a, r1, r2, stranger, gone].map(origin));
    const handle = createEpisodeHandler({
prices: measuredPrices(),
      store,
      env: { ESOPT_TRAINER_TOKEN: 'box-token' },
      tokenOrigins: link.tokenOrigins,
      trainerPins: link.pins,
      memoryMb: 1024,
      billedPerInvocation: true,
      log: { info() {}, error() {} },
    });
    const routed = async (run: string, routes: Box[][], iteration = 0): Promise<EpisodeRequest[]> =>
      (await sudokuRequests({ run, iteration, members: routes.length, tasks: 1, baseUrl: a.url, tokenEnv: 'ESOPT_TRAINER_TOKEN' })).map((r) => {
        const [primary, ...fallbacks] = routes[r.member as number];
        return { ...r, policy: { ...r.policy, baseUrl: primary.url, fallbackUrls: fallbacks.map((f) => f.url) } };
      });
    const play = async (requests: EpisodeRequest[]) => {
      const response = await handle({ episodes: requests });
      expect(response.ok).toBe(true);
      return Promise.all(requests.map(async (r) => RewardRecord.parse(JSON.parse(new TextDecoder().decode((await store.get(keys.reward(r.run, r.iteration, r.member, r.task.id)))!)))));
    };
    const counts = () => [a, r1, r2, stranger].map((x) => x.seen.length);

    // Two replicas, two certificates: member 0 plays on replica-1, member 1 on replica-2, each with the token.
    await announce(store, 'fleet', 'replica-1', r1);
    await announce(store, 'fleet', 'replica-2', r2);
    const coordinatorBefore = a.seen.length;
    const ok = await play(await routed('fleet', [[r1, a, r2], [r2, a, r1]]));
    expect(ok.map((r) => r.error)).toEqual([null, null]);
    expect(ok.every((r) => r.steps > 0)).toBe(true);
    expect(new Set(r1.models)).toEqual(new Set(['member-0-0']));
    expect(r1.models.length).toBeGreaterThan(0);
    expect(new Set(r2.models)).toEqual(new Set(['member-0-1']));
    expect([...r1.seen, ...r2.seen].every((h) => h === 'Bearer box-token')).toBe(true);
    expect(a.seen.length).toBe(coordinatorBefore);

    // A box of the stack that has not announced itself for this run (as primary or as a fallback) gets nothing, the token least of all.
    let before = counts();
    const [unannounced, viaFallback] = await play(await routed('fleet', [[stranger], [r1, stranger]], 1));
    expect(unannounced.error).toContain(`refusing to call ${origin(stranger)}: replica-3 has not announced itself for run fleet (${keys.replica('fleet', 'replica-3')})`);
    expect(viaFallback.error).toContain(`refusing to call ${origin(stranger)}`);
    // Announced under another run does not count either: the pins are the run's own.
    const [otherRun] = await play(await routed('fleet-other', [[r1]]));
    expect(otherRun.error).toContain('replica-1 has not announced itself for run fleet-other');
    // replica-3's key naming replica-1's address (a box announcing for another): refused, whatever certificate it carries.
    await store.put(keys.replica('fleet-claim', 'replica-3'), JSON.stringify({ id: 'replica-3', baseUrl: r1.url, tls: { certificate: r1.identity.cert, sha256: r1.identity.sha256 }, startedAt: new Date().toISOString() }));
    const [claimed] = await play(await routed('fleet-claim', [[stranger]]));
    expect(claimed.error).toContain(`announces replica-3 at ${origin(r1)}, not replica-3 at ${origin(stranger)}`);
    expect(counts()).toEqual(before);
    // Without the token: an origin outside the stack is refused by the fence, before anything is read.
    const outside = { ...(await routed('fleet-outside', [[r1]]))[0] };
    outside.policy = { ...outside.policy, baseUrl: 'https://198.51.100.1:8080/v1' };
    const [fenced] = await play([outside]);
    expect(fenced.error).toContain('refusing to send the trainer token to https://198.51.100.1:8080');

    // replica-2's announcement carries replica-1's certificate: the server at replica-2's origin is refused in the handshake.
    await announce(store, 'fleet-wrong', 'replica-2', r2, r1.identity);
    before = counts();
    const [wrong] = await play(await routed('fleet-wrong', [[r2]]));
    expect(wrong.error).toMatch(/is not the pinned/);
    expect(counts()).toEqual(before);

    // A replica that died mid-run: its members fail over to the other replica, pinned to that one's certificate.
    await announce(store, 'fleet-failover', 'replica-4', gone);
    await announce(store, 'fleet-failover', 'replica-2', r2);
    const r2Before = r2.models.length;
    const [failedOver] = await play(await routed('fleet-failover', [[gone, r2]]));
    expect(failedOver.error).toBeNull();
    expect(r2.models.slice(r2Before).length).toBeGreaterThan(0);
    expect(new Set(r2.models.slice(r2Before))).toEqual(new Set(['member-0-0']));
  });
});
