/**
 * Lambda's Runtime API (2018-06-01) for one execution environment, on loopback: the runtime interface
 * client polls `GET /runtime/invocation/next`, which holds until an invocation is handed in, and answers
 * with `POST /runtime/invocation/{id}/response` or `/error`; a handler that cannot load posts
 * `/runtime/init/error`. The headers are Lambda's (request id, deadline, function ARN, trace id).
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';

/** How an invocation ended, as the runtime reported it. */
export type RuntimeOutcome =
  | { kind: 'response'; body: string }
  | { kind: 'error'; errorType: string; errorMessage: string; body: string }
  | { kind: 'init-error'; errorType: string; errorMessage: string };

interface Pending {
  id: string;
  event: string;
  deadlineMs: number;
  resolve: (outcome: RuntimeOutcome) => void;
}

export interface RuntimeApi {
  /** host:port, the value of AWS_LAMBDA_RUNTIME_API. */
  address: string;
  /** Hands one invocation to the runtime; resolves with what it posted back. */
  invoke(event: unknown, deadlineMs: number): Promise<RuntimeOutcome>;
  /** Resolves when the runtime posts an init error (the handler could not be loaded). */
  readonly initError: Promise<RuntimeOutcome & { kind: 'init-error' }>;
  close(): Promise<void>;
}

const REQUEST_ID = 'Lambda-Runtime-Aws-Request-Id';

function errorFields(body: string): { errorType: string; errorMessage: string } {
  try {
    const parsed = JSON.parse(body) as { errorType?: unknown; errorMessage?: unknown };
    return { errorType: String(parsed.errorType ?? 'Unknown'), errorMessage: String(parsed.errorMessage ?? '') };
  } catch {
    return { errorType: 'Unknown', errorMessage: body.slice(0, 1000) };
  }
}

export async function startRuntimeApi(functionArn: string): Promise<RuntimeApi> {
  const waiting: Array<(p: Pending) => void> = [];
  const queued: Pending[] = [];
  const inFlight = new Map<string, Pending>();
  let reportInitError!: (o: RuntimeOutcome & { kind: 'init-error' }) => void;
  const initError = new Promise<RuntimeOutcome & { kind: 'init-error' }>((resolve) => (reportInitError = resolve));
  const app = new Hono().basePath('/2018-06-01/runtime');
  app.get('/invocation/next', async (c) => {
    const next = queued.shift() ?? (await new Promise<Pending>((resolve) => waiting.push(resolve)));
    inFlight.set(next.id, next);
    return c.body(next.event, 200, {
      'Content-Type': 'application/json',
      [REQUEST_ID]: next.id,
      'Lambda-Runtime-Deadline-Ms': String(next.deadlineMs),
      'Lambda-Runtime-Invoked-Function-Arn': functionArn,
      'Lambda-Runtime-Trace-Id': `Root=1-${Math.floor(Date.now() / 1000).toString(16)}-${randomUUID().replace(/-/g, '').slice(0, 24)};Parent=${randomUUID().replace(/-/g, '').slice(0, 16)};Sampled=0`,
    });
  });
  const settle = (id: string, outcome: RuntimeOutcome) => {
    const pending = inFlight.get(id);
    if (!pending) return false;
    inFlight.delete(id);
    pending.resolve(outcome);
    return true;
  };
  app.post('/invocation/:id/response', async (c) => {
    const body = await c.req.text();
    return settle(c.req.param('id'), { kind: 'response', body }) ? c.json({ status: 'OK' }, 202) : c.json({ errorMessage: 'unknown request id', errorType: 'InvalidRequestID' }, 400);
  });
  app.post('/invocation/:id/error', async (c) => {
    const body = await c.req.text();
    return settle(c.req.param('id'), { kind: 'error', ...errorFields(body), body }) ? c.json({ status: 'OK' }, 202) : c.json({ errorMessage: 'unknown request id', errorType: 'InvalidRequestID' }, 400);
  });
  app.post('/init/error', async (c) => {
    reportInitError({ kind: 'init-error', ...errorFields(await c.req.text()) });
    return c.json({ status: 'OK' }, 202);
  });
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    initError,
    invoke(event, deadlineMs) {
      return new Promise<RuntimeOutcome>((resolve) => {
        const pending: Pending = { id: randomUUID(), event: JSON.stringify(event ?? null), deadlineMs, resolve };
        const taker = waiting.shift();
        if (taker) taker(pending);
        else queued.push(pending);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // A runtime's long poll would hold the server open.
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
}
