/**
 * A Lambda function URL on loopback: each HTTP request becomes a payload-format 2.0 event (raw path and
 * query, lower-cased headers with repeats joined by commas, cookies apart, a non-text body base64-encoded),
 * and the function's result becomes the response by the function-URL rules: an object with `statusCode`
 * gives status, headers, cookies and body (base64-decoded when `isBase64Encoded`); any other value is
 * answered 200 as JSON; a function error is 502. Requests and responses past 6 MB are refused, as Lambda does.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { InvocationOutcome } from './execution-environment.ts';

const PAYLOAD_LIMIT = 6 * 1024 * 1024;
const TEXT_TYPES = /^(text\/|application\/(json|x-www-form-urlencoded|xml|javascript|[a-z.+-]*\+json|[a-z.+-]*\+xml))/i;

export interface FunctionUrl {
  url: string;
  close(): Promise<void>;
}

export function functionUrlEvent(req: IncomingMessage, body: Buffer, domain: string): Record<string, unknown> {
  const url = new URL(req.url ?? '/', `http://${domain}`);
  const headers: Record<string, string> = {};
  let cookies: string[] | undefined;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!.toLowerCase();
    const value = req.rawHeaders[i + 1]!;
    if (name === 'cookie') cookies = [...(cookies ?? []), ...value.split(/;\s*/).filter(Boolean)];
    else headers[name] = headers[name] === undefined ? value : `${headers[name]},${value}`;
  }
  const now = new Date();
  const contentType = headers['content-type'] ?? '';
  const text = body.length === 0 || TEXT_TYPES.test(contentType);
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: decodeURIComponent(url.pathname),
    rawQueryString: url.search.slice(1),
    ...(cookies ? { cookies } : {}),
    headers,
    ...(url.search ? { queryStringParameters: Object.fromEntries([...new Set(url.searchParams.keys())].map((k) => [k, url.searchParams.getAll(k).join(',')])) } : {}),
    requestContext: {
      accountId: 'anonymous',
      apiId: domain.split('.')[0],
      domainName: domain,
      domainPrefix: domain.split('.')[0],
      http: { method: req.method ?? 'GET', path: decodeURIComponent(url.pathname), protocol: `HTTP/${req.httpVersion}`, sourceIp: req.socket.remoteAddress ?? '127.0.0.1', userAgent: headers['user-agent'] ?? '' },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    ...(body.length ? { body: text ? body.toString('utf8') : body.toString('base64') } : {}),
    isBase64Encoded: !text,
  };
}

interface UrlResult {
  statusCode: number;
  headers?: Record<string, string>;
  cookies?: string[];
  body?: string;
  isBase64Encoded?: boolean;
}

function send(res: ServerResponse, status: number, headers: Record<string, string | string[]>, body: Buffer) {
  res.writeHead(status, { ...headers, 'content-length': String(body.length) });
  res.end(body);
}

export function writeResult(res: ServerResponse, outcome: InvocationOutcome): void {
  if (!outcome.ok) return send(res, 502, { 'content-type': 'application/json' }, Buffer.from(JSON.stringify({ Message: 'Internal Server Error' })));
  if ((outcome.payload?.length ?? 0) > PAYLOAD_LIMIT) return send(res, 502, { 'content-type': 'application/json' }, Buffer.from(JSON.stringify({ Message: 'Response payload size exceeded maximum allowed payload size (6291556 bytes).' })));
  const value = JSON.parse(outcome.payload ?? 'null') as unknown;
  if (value !== null && typeof value === 'object' && 'statusCode' in value) {
    const r = value as UrlResult;
    const body = r.body === undefined ? Buffer.alloc(0) : r.isBase64Encoded ? Buffer.from(r.body, 'base64') : Buffer.from(r.body, 'utf8');
    return send(res, r.statusCode, { ...(r.headers ?? {}), ...(r.cookies?.length ? { 'set-cookie': r.cookies } : {}) }, body);
  }
  return send(res, 200, { 'content-type': 'application/json' }, Buffer.from(JSON.stringify(value)));
}

export async function startFunctionUrl(fn: { invoke(event: unknown): Promise<InvocationOutcome> }): Promise<FunctionUrl> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= PAYLOAD_LIMIT) chunks.push(c);
    });
    req.on('end', () => {
      if (size > PAYLOAD_LIMIT) return send(res, 413, { 'content-type': 'application/json' }, Buffer.from(JSON.stringify({ Message: 'Request must be smaller than 6291456 bytes for the InvokeFunction operation' })));
      const { port } = server.address() as AddressInfo;
      fn.invoke(functionUrlEvent(req, Buffer.concat(chunks), `rehearsal${port}.lambda-url.us-east-1.on.aws`)).then(
        (outcome) => writeResult(res, outcome),
        (err: Error) => send(res, 502, { 'content-type': 'application/json' }, Buffer.from(JSON.stringify({ Message: err.message }))),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
