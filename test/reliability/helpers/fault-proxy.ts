/**
 * A loopback HTTP proxy in front of a real server (s3rver) that breaks chosen requests the ways S3 and
 * the network do: a 503 SlowDown answered instead of the request, the connection reset before the
 * request reaches the server, or reset after the server has applied it (the reply lost on the way
 * back). `plan(n)` picks the fault of the n-th request (0-based); every injected fault is counted.
 */
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type Fault = 'slowdown' | 'reset-before' | 'reset-after';

export interface FaultProxy {
  url: string;
  requests: number;
  injected: Record<Fault, number>;
  close(): Promise<void>;
}

const SLOW_DOWN = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>';

/** A TCP reset, not a clean close: what a dropped connection looks like to the client. */
function reset(socket: Socket): void {
  socket.resetAndDestroy();
}

export async function startFaultProxy(target: string, plan: (n: number) => Fault | null): Promise<FaultProxy> {
  const upstream = new URL(target);
  const injected: Record<Fault, number> = { slowdown: 0, 'reset-before': 0, 'reset-after': 0 };
  const proxy: FaultProxy = { url: '', requests: 0, injected, close: async () => {} };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const fault = plan(proxy.requests++);
    if (fault) injected[fault]++;
    if (fault === 'slowdown') {
      res.writeHead(503, { 'content-type': 'application/xml' });
      res.end(SLOW_DOWN);
      return;
    }
    if (fault === 'reset-before') return reset(req.socket);
    const forward = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
      if (fault === 'reset-after') {
        // The server did the work; the client never hears of it.
        up.resume();
        up.on('end', () => reset(req.socket));
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
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return proxy;
}
