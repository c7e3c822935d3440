/**
 * `fetch` for calls to endpoints a user names (environment servers, rollout agents, MCP servers, web apps):
 * the connection goes only to an address address-policy.ts allows (checked on the address connected to,
 * after DNS), redirects are never followed (a 3xx is an OutboundError: a public server cannot bounce the
 * call inward), the response body is cut off past `maxResponseBytes` (an OutboundError while reading, so a
 * caller never holds more), and the whole call — headers and body — ends after `timeoutMs`.
 *
 * Error messages are fixed per reason and name the status at most: a server's body never reaches an error,
 * a record or a log from here. The body streams (server-sent events work), so the cap and the timeout hold
 * for streams too.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { checkAddress, checkUrl, OutboundError, type OutboundPolicy } from './address-policy.ts';

export interface OutboundLimits {
  /** The whole call: connect, headers and body. */
  timeoutMs: number;
  maxResponseBytes: number;
  /**
   * `refuse` (default): a 3xx is an OutboundError. `return`: the 3xx is answered as it came, body dropped, for a
   * caller that checks the Location itself before going on (the browser's proxy: Chromium asks again, and that
   * request is checked like the first).
   */
  redirects?: 'refuse' | 'return';
}

/**
 * A `lookup` for node:net, node:http(s) and `ws` that resolves as usual and refuses (with OutboundError) when any
 * address the name resolves to is not allowed: the socket then connects only to a checked address.
 */
export function guardedLookup(policy: OutboundPolicy): LookupFunction {
  return ((hostname: string, options: LookupOptions, callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      try {
        if (addresses.length === 0) throw new OutboundError('address', `${hostname} resolves to no address`);
        for (const a of addresses) checkAddress(a.address, policy);
      } catch (refused) {
        return callback(refused as NodeJS.ErrnoException, '', 0);
      }
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  }) as LookupFunction;
}

function bodyOf(body: RequestInit['body']): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (body instanceof URLSearchParams) return body.toString();
  throw new TypeError('outboundFetch sends string, byte or URLSearchParams bodies only');
}

/** The response body as a web stream that errors once more than `max` bytes came, or when `signal` aborts. */
function cappedBody(res: IncomingMessage, max: number, signal: AbortSignal, timeoutError: () => OutboundError): ReadableStream<Uint8Array> {
  let seen = 0;
  // Once the stream has ended, errored or been cancelled, events still in flight from the socket are dropped.
  let settled = false;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      const settle = (end: () => void) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        end();
      };
      const fail = (err: OutboundError) =>
        settle(() => {
          res.destroy();
          controller.error(err);
        });
      const onAbort = () => fail(timeoutError());
      signal.addEventListener('abort', onAbort, { once: true });
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        seen += chunk.length;
        if (seen > max) return fail(new OutboundError('too-large', `the response passed ${max} bytes`));
        controller.enqueue(new Uint8Array(chunk));
      });
      res.on('end', () => settle(() => controller.close()));
      res.on('error', () => fail(new OutboundError('network', 'the connection failed while reading the response')));
    },
    cancel() {
      settled = true;
      res.destroy();
    },
  });
}

/** The response's headers; each Set-Cookie kept apart (Headers.getSetCookie), the others joined as HTTP joins them. */
function headersOf(res: IncomingMessage): Headers {
  const headers = new Headers();
  for (const [k, v] of Object.entries(res.headers)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const one of v) headers.append(k, one);
    else headers.set(k, v);
  }
  return headers;
}

export function outboundFetch(policy: OutboundPolicy, limits: OutboundLimits): typeof fetch {
  const lookup = guardedLookup(policy);
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    checkUrl(url, policy);
    const signal = init.signal ? AbortSignal.any([init.signal, AbortSignal.timeout(limits.timeoutMs)]) : AbortSignal.timeout(limits.timeoutMs);
    const timeoutError = () => (init.signal?.aborted ? (init.signal.reason as OutboundError) : new OutboundError('timeout', `no complete answer within ${limits.timeoutMs} ms`));
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const body = bodyOf(init.body);
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<Response>((resolve, reject) => {
      if (signal.aborted) return reject(timeoutError());
      const req = request(url, { method: init.method ?? 'GET', headers, lookup, signal }, (res) => {
        const status = res.statusCode ?? 0;
        if (status >= 300 && status < 400 && status !== 304) {
          res.destroy();
          if (limits.redirects === 'return') return resolve(new Response(null, { status, statusText: res.statusMessage ?? '', headers: headersOf(res) }));
          return reject(new OutboundError('redirect', `the server answered ${status} (a redirect); redirects are not followed`));
        }
        const length = Number(res.headers['content-length']);
        if (Number.isFinite(length) && length > limits.maxResponseBytes) {
          res.destroy();
          return reject(new OutboundError('too-large', `the response passed ${limits.maxResponseBytes} bytes`));
        }
        const responseHeaders = headersOf(res);
        const noBody = status === 204 || status === 205 || init.method === 'HEAD';
        if (noBody) res.resume();
        resolve(new Response(noBody ? null : cappedBody(res, limits.maxResponseBytes, signal, timeoutError), { status, statusText: res.statusMessage ?? '', headers: responseHeaders }));
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (err instanceof OutboundError) return reject(err);
        if (signal.aborted) return reject(timeoutError());
        reject(new OutboundError('network', `could not reach ${url.origin}${err.code ? ` (${err.code})` : ''}`));
      });
      req.end(body);
    });
  }) as typeof fetch;
}
