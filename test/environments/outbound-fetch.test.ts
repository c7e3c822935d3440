import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkAddress, EMBEDDED_OUTBOUND, OutboundError, outboundPolicyFromEnv, PUBLIC_ONLY } from '../../environments/outbound/address-policy.ts';
import { outboundFetch } from '../../environments/outbound/outbound-fetch.ts';

let server: Server;
let base: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/ok') return res.end(JSON.stringify({ ok: true }));
    if (req.url === '/redirect') return res.writeHead(303, { location: 'http://127.0.0.1:1/secret' }).end('inner body');
    if (req.url === '/big') return res.end('x'.repeat(10_000));
    if (req.url === '/big-chunked') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const tick = setInterval(() => res.write('y'.repeat(1000)), 1);
      res.on('close', () => clearInterval(tick));
      return;
    }
    if (req.url === '/slow') return void setTimeout(() => res.end('late'), 2_000);
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server.closeAllConnections() ?? server.close());

const limits = { timeoutMs: 500, maxResponseBytes: 4096 };
async function failure(p: Promise<unknown>): Promise<OutboundError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(OutboundError);
  return err as OutboundError;
}

describe('address policy', () => {
  it('allows public unicast and refuses metadata, link-local and reserved whatever the operator allows', () => {
    expect(() => checkAddress('8.8.8.8', PUBLIC_ONLY)).not.toThrow();
    for (const a of ['169.254.169.254', 'fe80::1', '0.0.0.0', '224.0.0.1', '192.0.2.1']) {
      expect(() => checkAddress(a, { allow: ['private', 'loopback'] }), a).toThrow(/never reachable/);
    }
  });
  it('refuses private, unique-local (fd00:ec2::254), CGNAT and loopback (v4-mapped too) unless allowed', () => {
    for (const a of ['10.1.2.3', '192.168.0.1', 'fd00:ec2::254', '100.64.0.1']) {
      expect(() => checkAddress(a, PUBLIC_ONLY), a).toThrow(/private address/);
      expect(() => checkAddress(a, { allow: ['private'] }), a).not.toThrow();
    }
    for (const a of ['127.0.0.1', '::1', '::ffff:127.0.0.1']) {
      expect(() => checkAddress(a, PUBLIC_ONLY), a).toThrow(/loopback address/);
      expect(() => checkAddress(a, EMBEDDED_OUTBOUND), a).not.toThrow();
    }
  });
  it("reads the operator's ESOPT_ENDPOINT_NETWORKS and refuses unknown networks", () => {
    expect(outboundPolicyFromEnv({})).toEqual(PUBLIC_ONLY);
    expect(outboundPolicyFromEnv({ ESOPT_ENDPOINT_NETWORKS: 'private, loopback,private' })).toEqual({ allow: ['private', 'loopback'] });
    expect(() => outboundPolicyFromEnv({ ESOPT_ENDPOINT_NETWORKS: 'link-local' })).toThrow(/only "private" and "loopback"/);
  });
});

describe('outboundFetch', () => {
  it('reaches a loopback server when the policy allows loopback', async () => {
    const res = await outboundFetch(EMBEDDED_OUTBOUND, limits)(`${base}/ok`);
    expect(await res.json()).toEqual({ ok: true });
  });
  it('refuses plain http and loopback targets on a public-only policy, by literal and by name', async () => {
    expect((await failure(outboundFetch(PUBLIC_ONLY, limits)(`${base}/ok`))).reason).toBe('scheme');
    const port = new URL(base).port;
    expect((await failure(outboundFetch(PUBLIC_ONLY, limits)(`https://127.0.0.1:${port}/ok`))).reason).toBe('address');
    // a name is checked on the address it resolves to, before any byte is sent
    const byName = await failure(outboundFetch(PUBLIC_ONLY, limits)(`https://localhost:${port}/ok`));
    expect(byName.reason).toBe('address');
    expect(byName.message).toMatch(/loopback address/);
  });
  it('never follows a redirect and never reports its body', async () => {
    const err = await failure(outboundFetch(EMBEDDED_OUTBOUND, limits)(`${base}/redirect`));
    expect(err.reason).toBe('redirect');
    expect(err.message).not.toContain('inner body');
  });
  it('cuts a body past the cap, declared or streamed', async () => {
    expect((await failure(outboundFetch(EMBEDDED_OUTBOUND, limits)(`${base}/big`))).reason).toBe('too-large');
    const res = await outboundFetch(EMBEDDED_OUTBOUND, { timeoutMs: 5_000, maxResponseBytes: 4096 })(`${base}/big-chunked`);
    expect((await failure(res.text())).reason).toBe('too-large');
  });
  it('ends a call that takes longer than its time limit', async () => {
    const started = Date.now();
    expect((await failure(outboundFetch(EMBEDDED_OUTBOUND, limits)(`${base}/slow`))).reason).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(1_500);
  });
  it('refuses credentials in the URL and other schemes', async () => {
    expect((await failure(outboundFetch(EMBEDDED_OUTBOUND, limits)(base.replace('//', '//u:p@') + '/ok'))).reason).toBe('scheme');
    expect((await failure(outboundFetch(EMBEDDED_OUTBOUND, limits)('file:///etc/passwd'))).reason).toBe('scheme');
  });
});
