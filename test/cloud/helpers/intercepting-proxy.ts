/**
 * A loopback HTTP proxy in front of a real server that lets a test answer chosen requests itself:
 * the way to make a real s3rver look throttled, or look like AWS S3 evaluating If-None-Match.
 */
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Intercept {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

export interface InterceptingProxy {
  url: string;
  seen: { method: string; url: string; headers: IncomingMessage['headers']; intercepted: boolean }[];
  close(): Promise<void>;
}

export async function startInterceptingProxy(
  target: string,
  decide: (req: IncomingMessage) => Promise<Intercept | null> | Intercept | null,
): Promise<InterceptingProxy> {
  const upstream = new URL(target);
  const seen: InterceptingProxy['seen'] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const intercept = await decide(req);
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, intercepted: intercept !== null });
    if (intercept) {
      res.writeHead(intercept.status, intercept.headers ?? {});
      res.end(intercept.body ?? '');
      return;
    }
    const forward = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    forward.on('error', (err) => {
      res.writeHead(502);
      res.end(err.message);
    });
    forward.end(Buffer.concat(chunks));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
