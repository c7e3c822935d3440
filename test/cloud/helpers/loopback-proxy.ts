/**
 * A loopback HTTP proxy in front of a real server (s3rver) for tests that need the server to misbehave
 * on cue. For each request, `decide(req, n)` (n: the request's 0-based number) says what happens:
 *  - null: forwarded untouched;
 *  - an `Answer`: the proxy answers it itself (how AWS would answer: a 412 for If-None-Match, a throttle);
 *  - a `Fault`, the ways S3 and the network break: `slowdown` (a 503 SlowDown instead of the request),
 *    `reset-before` (a TCP reset before the server sees it), `reset-after` (the server applies it, the
 *    reply is lost), `empty-body` (the server's status and headers, but no body: what s3rver answers to
 *    a GET while it is still writing that object in place).
 * Every request is listed in `seen`, every injected fault counted in `injected`.
 */
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Fault = 'slowdown' | 'reset-before' | 'reset-after' | 'empty-body';

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

export type Decision = Fault | Answer | null;

export interface LoopbackProxy {
  url: string;
  seen: { method: string; url: string; headers: IncomingMessage['headers']; intercepted: boolean }[];
  injected: Record<Fault, number>;
  close(): Promise<void>;
}

const SLOW_DOWN = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>';

export async function startLoopbackProxy(target: string, decide: (req: IncomingMessage, n: number) => Promise<Decision> | Decision): Promise<LoopbackProxy> {
  const upstream = new URL(target);
  const seen: LoopbackProxy['seen'] = [];
  const injected: Record<Fault, number> = { slowdown: 0, 'reset-before': 0, 'reset-after': 0, 'empty-body': 0 };
  let requests = 0;
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const decision = await decide(req, requests++);
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, intercepted: decision !== null });
    if (typeof decision === 'string') injected[decision]++;
    if (decision === 'slowdown') {
      res.writeHead(503, { 'content-type': 'application/xml' });
      res.end(SLOW_DOWN);
      return;
    }
    // A TCP reset, not a clean close: what a dropped connection looks like to the client.
    if (decision === 'reset-before') return req.socket.resetAndDestroy();
    if (decision !== null && typeof decision === 'object') {
      res.writeHead(decision.status, decision.headers ?? {});
      res.end(decision.body ?? '');
      return;
    }
    const forward = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
      if (decision === 'reset-after') {
        // The server did the work; the client never hears of it.
        up.resume();
        up.on('end', () => req.socket.resetAndDestroy());
        return;
      }
      if (decision === 'empty-body') {
        up.resume();
        const { 'content-length': _length, ...headers } = up.headers;
        res.writeHead(up.statusCode ?? 502, { ...headers, 'content-length': '0' });
        res.end();
        return;
      }
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    forward.on('error', (err) => {
      res.writeHead(502);
      res.end(err.message);
    });
    forward.end(Buffer.concat(chunks));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    injected,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
