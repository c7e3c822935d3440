/**
 * `fetch` over HTTPS to a server whose certificate is pinned: the connection is accepted only if the
 * server presents exactly that certificate (its SHA-256 fingerprint), whatever the host name, so a
 * self-signed trainer certificate published through a trusted channel is enough, and any other server
 * (a DNS or address hijack, a box that is not ours) never sees the request or its bearer token.
 */
import { Agent, request } from 'node:https';
import type { PeerCertificate } from 'node:tls';

export interface CertificatePin {
  /** PEM: the trust anchor for the chain check. */
  certificate: string;
  /** AA:BB:… SHA-256 of the DER certificate: the pin. */
  sha256: string;
}

export class PinMismatchError extends Error {}

/** A fetch for POSTs and GETs with small bodies (the chat-completions client's use), pinned to `pin`. */
export function pinnedFetch(pin: CertificatePin): typeof fetch {
  const agent = new Agent({
    keepAlive: true,
    ca: pin.certificate,
    // Called after the chain verified against `ca`; the pin replaces the host-name check.
    checkServerIdentity: (_host: string, cert: PeerCertificate) =>
      cert.fingerprint256 === pin.sha256 ? undefined : new PinMismatchError(`the server's certificate ${cert.fingerprint256} is not the pinned ${pin.sha256}`),
  });
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    if (url.protocol !== 'https:') throw new TypeError(`a pinned connection must be https, not ${url.protocol}`);
    const body = init.body === undefined || init.body === null ? undefined : String(init.body);
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    return new Promise<Response>((resolve, reject) => {
      const req = request(url, { method: init.method ?? 'GET', headers, agent, signal: init.signal ?? undefined }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const responseHeaders = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) responseHeaders.set(k, Array.isArray(v) ? v.join(', ') : v);
          resolve(new Response(res.statusCode === 204 ? null : Buffer.concat(chunks), { status: res.statusCode ?? 0, headers: responseHeaders }));
        });
      });
      // Like fetch: a network failure is a TypeError with the reason as its cause. A chain that does not verify
      // against the pinned certificate is a server that is not the pinned one, like a fingerprint mismatch.
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (init.signal?.aborted) return reject(init.signal.reason);
        const cause = !(err instanceof PinMismatchError) && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(err.code ?? '') ? new PinMismatchError(`the server's certificate is not the pinned ${pin.sha256} (${err.message})`) : err;
        reject(new TypeError('fetch failed', { cause }));
      });
      req.end(body);
    });
  }) as typeof fetch;
}

/** One pinned fetch per origin (trainer replicas: each server its own certificate); an origin without a pin is refused. */
export function pinnedFetchByOrigin(pins: Record<string, CertificatePin>): typeof fetch {
  const fetches = new Map(Object.entries(pins).map(([origin, pin]) => [origin, pinnedFetch(pin)]));
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const origin = new URL(typeof input === 'string' || input instanceof URL ? input : input.url).origin;
    const pinned = fetches.get(origin);
    if (!pinned) throw new TypeError('fetch failed', { cause: new PinMismatchError(`no certificate is pinned for ${origin}`) });
    return pinned(input, init);
  }) as typeof fetch;
}
