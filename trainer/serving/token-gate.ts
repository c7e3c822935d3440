/**
 * The box's public inference port: TLS with the box's identity and the stack's (rotating) bearer token
 * checked here, every request then passed to whichever inference server the box runs now (a run's, an
 * evaluation's) on a loopback port with a token of the box's own. So the servers need no knowledge of
 * rotation, and the port stays open between jobs: with no server upstream a request gets 503, which
 * the Episode function's policy retries like any 5xx. /healthz passes without a token, as on the servers.
 * A rollout key (rollout-keys.ts) passes as it came: the server behind issued it and is the one that
 * knows it, and it opens nothing there but its own model's chat completions.
 */
import { createServer as createHttpServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { bearerToken } from '../../shared/bearer-token.ts';
import { isRolloutKey } from './rollout-keys.ts';
import type { TlsIdentity } from './tls-identity.ts';
import type { TokenCheck } from './token-follower.ts';

export interface TokenGateOptions {
  host: string;
  /** 0: a free port. */
  port: number;
  tls?: TlsIdentity;
  tokens: TokenCheck;
  /** The inference server behind the gate: 127.0.0.1:port, opened with `token`. */
  upstream: { port: number; token: string };
}

export interface RunningGate {
  port: number;
  close(): Promise<void>;
}

/** Connection-level headers belong to one hop; node sets its own. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

function json(res: ServerResponse, status: number, message: string, code: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code } }));
}

export async function startTokenGate(o: TokenGateOptions): Promise<RunningGate> {
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? '/';
    const given = bearerToken(req.headers.authorization);
    const rolloutKey = given !== null && isRolloutKey(given);
    if (!/^\/healthz(\?|$)/.test(path) && !rolloutKey) {
      if (given === null || !(await o.tokens.accepts(given))) {
        json(res, 401, 'missing or wrong bearer token (Authorization: Bearer <ESOPT_TOKEN>)', 'invalid_api_key', { 'www-authenticate': 'Bearer' });
        req.resume();
        return;
      }
    }
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !HOP_BY_HOP.has(k)));
    const upstream = request({ host: '127.0.0.1', port: o.upstream.port, method: req.method, path, headers: rolloutKey ? headers : { ...headers, authorization: `Bearer ${o.upstream.token}` } }, (answer) => {
      const back = Object.fromEntries(Object.entries(answer.headers).filter(([k]) => !HOP_BY_HOP.has(k)));
      res.writeHead(answer.statusCode ?? 502, back as Record<string, string | string[]>);
      answer.pipe(res);
    });
    upstream.on('error', () => {
      if (!res.headersSent) json(res, 503, 'no inference server is running on this box now', 'unavailable', { 'retry-after': '1' });
      else res.destroy();
    });
    // A caller that goes away cancels the request upstream (the server then frees its batch slot).
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  };
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) json(res, 500, 'the token check failed', 'internal_error');
    });
  };
  const server: Server = o.tls ? createHttpsServer({ key: o.tls.key, cert: o.tls.cert }, listener) : createHttpServer(listener);
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(o.port, o.host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
