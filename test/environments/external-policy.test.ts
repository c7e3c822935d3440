/**
 * An endpoint that is not ours (an external agent under evaluation) is called as outbound: a redirect is never
 * followed (the probe: a 303 to a loopback server put that server's body in the record), a body is
 * never copied into an error, an oversized answer is cut off, and an address the place does not allow is
 * refused before any byte is sent.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EMBEDDED_OUTBOUND, PUBLIC_ONLY } from '../../environments/outbound/address-policy.ts';
import { HttpPolicy } from '../../environments/policies/http-client.ts';
import { PolicyHttpError } from '../../environments/policies/http-errors.ts';

let inner: Server;
let outer: Server;
let innerCalls = 0;
let innerUrl = '';
let outerUrl = '';
let answer: (res: import('node:http').ServerResponse) => void = (res) => res.end('{}');

beforeAll(async () => {
  inner = createServer((_req, res) => {
    innerCalls++;
    res.end('INNER-SECRET-PAGE');
  });
  outer = createServer((req, res) => {
    req.resume();
    answer(res);
  });
  await new Promise<void>((r) => inner.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => outer.listen(0, '127.0.0.1', r));
  innerUrl = `http://127.0.0.1:${(inner.address() as AddressInfo).port}`;
  outerUrl = `http://127.0.0.1:${(outer.address() as AddressInfo).port}/v1`;
});
afterAll(() => {
  inner.close();
  outer.close();
});

async function failure(policy: HttpPolicy): Promise<PolicyHttpError> {
  const err = await policy.act([{ role: 'user', content: 'hi' }], { step: 0 }).then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(PolicyHttpError);
  return err as PolicyHttpError;
}
const external = (extra: Partial<ConstructorParameters<typeof HttpPolicy>[0]> = {}) =>
  new HttpPolicy({ baseUrl: outerUrl, model: 'their-agent', outbound: EMBEDDED_OUTBOUND, retries: 1, backoffBaseMs: 1, backoffMaxMs: 1, ...extra });

describe('an external endpoint, called as outbound', () => {
  it('never follows a redirect: the server it points to is never called, its body never recorded', async () => {
    answer = (res) => res.writeHead(303, { location: innerUrl }).end();
    const err = await failure(external());
    expect(err.message).toMatch(/303 \(a redirect\); redirects are not followed/);
    expect(err.attempts).toBe(1); // refused, not retried
    expect(innerCalls).toBe(0);
  });

  it('records the status only, never the body, of a failing or non-JSON answer', async () => {
    for (const [status, body] of [[400, 'INNER-SECRET-PAGE'], [500, 'INNER-SECRET-PAGE'], [200, 'INNER-SECRET-PAGE not json']] as const) {
      answer = (res) => res.writeHead(status).end(body);
      const err = await failure(external());
      expect(err.message).not.toContain('INNER-SECRET');
      expect(err.message).toMatch(status === 200 ? /not JSON/ : new RegExp(`HTTP ${status}`));
    }
  });

  it('cuts off an oversized answer', async () => {
    answer = (res) => res.end(JSON.stringify({ choices: [{ message: { content: 'x'.repeat(5 * 1024 * 1024) } }] }));
    expect((await failure(external())).message).toMatch(/passed 4194304 bytes/);
  });

  it("refuses an address the place does not allow, before any request", async () => {
    answer = (res) => res.end('{}');
    const err = await failure(external({ outbound: PUBLIC_ONLY }));
    expect(err.message).toMatch(/only for a server on this machine/);
  });

  it("still shows our own server's body (no outbound policy): its messages are ours", async () => {
    answer = (res) => res.writeHead(400).end('model member-9-1 is unknown');
    const err = await failure(new HttpPolicy({ baseUrl: outerUrl, model: 'base', retries: 0 }));
    expect(err.message).toContain('member-9-1 is unknown');
  });
});
