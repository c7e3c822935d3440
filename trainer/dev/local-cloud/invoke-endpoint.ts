/**
 * A Lambda-Invoke-compatible HTTP endpoint on loopback: `POST /2015-03-31/functions/{name}/invocations`
 * as @aws-sdk/client-lambda calls it, running the real handler code in this process. With
 * `X-Amz-Invocation-Type: Event` it answers 202 and runs the handler later, like Lambda's async queue
 * (at most `concurrency` at once); `RequestResponse` runs it and answers its result. Faults from
 * invoke-faults.ts make it throttle, fail, dawdle and deliver twice. `esopt dev cloud` and the tests use it.
 */
import { serve, type ServerType } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import type { AddressInfo } from 'node:net';
import { SeededRandom } from '../../../environments/random.ts';
import { InvokeFaults, sampleLatency, type InvokeFaultsInput } from './invoke-faults.ts';

export type InvokeHandler = (event: unknown) => Promise<unknown>;

export interface InvokeStats {
  calls: number;
  throttled: number;
  serverErrors: number;
  accepted: number;
  /** Handler runs, duplicates included. */
  deliveries: number;
  duplicateDeliveries: number;
  handlerErrors: number;
  /** Largest number of handler runs in flight at once. */
  peakConcurrency: number;
  /** When handler runs started and ended (epoch ms): what a benchmark needs to find the episodes' span. */
  firstStartMs: number | null;
  lastEndMs: number | null;
  /** The longest injected latency: with enough concurrency, the least an iteration can take. */
  maxInjectedMs: number;
}

export interface InvokeEndpoint {
  url: string;
  stats: InvokeStats;
  /** Resolves once no async delivery is queued or running. */
  drained(): Promise<void>;
  close(): Promise<void>;
}

const PATH = '/2015-03-31/functions/:name/invocations';

function awsError(c: Context, status: number, type: string, message: string) {
  c.header('x-amzn-ErrorType', type);
  return c.json({ Type: status >= 500 ? 'Service' : 'User', message }, status as 400);
}

export async function startInvokeEndpoint(functions: Record<string, InvokeHandler>, faultsInput: InvokeFaultsInput = {}): Promise<InvokeEndpoint> {
  const faults = InvokeFaults.parse(faultsInput);
  const random = new SeededRandom(faults.seed);
  const stats: InvokeStats = {
    calls: 0, throttled: 0, serverErrors: 0, accepted: 0, deliveries: 0, duplicateDeliveries: 0, handlerErrors: 0, peakConcurrency: 0, firstStartMs: null, lastEndMs: null, maxInjectedMs: 0,
  };
  let running = 0;
  const queue: (() => void)[] = [];
  let pendingAsync = 0;
  let drainWaiters: (() => void)[] = [];

  /** Waits for a concurrency slot (the async queue), runs the handler after the injected latency. */
  async function deliver(handler: InvokeHandler, event: unknown, duplicate: boolean): Promise<{ ok: true; value: unknown } | { ok: false; error: Error }> {
    if (running >= faults.concurrency) await new Promise<void>((resolve) => queue.push(resolve));
    running++;
    stats.peakConcurrency = Math.max(stats.peakConcurrency, running);
    stats.deliveries++;
    if (duplicate) stats.duplicateDeliveries++;
    const start = Date.now();
    stats.firstStartMs = Math.min(stats.firstStartMs ?? start, start);
    try {
      const delay = sampleLatency(faults.latency, random.float(), random.float());
      stats.maxInjectedMs = Math.max(stats.maxInjectedMs, delay);
      if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
      return { ok: true, value: await handler(structuredClone(event)) };
    } catch (err) {
      stats.handlerErrors++;
      return { ok: false, error: err instanceof Error ? err : new Error(String(err)) };
    } finally {
      running--;
      stats.lastEndMs = Math.max(stats.lastEndMs ?? 0, Date.now());
      queue.shift()?.();
    }
  }

  function settleAsync() {
    pendingAsync--;
    if (pendingAsync === 0) {
      drainWaiters.forEach((w) => w());
      drainWaiters = [];
    }
  }

  const app = new Hono();
  app.post(PATH, async (c) => {
    stats.calls++;
    const handler = functions[c.req.param('name')];
    if (!handler) return awsError(c, 404, 'ResourceNotFoundException', `Function not found: ${c.req.param('name')}`);
    const type = c.req.header('x-amz-invocation-type') ?? 'RequestResponse';
    if (type !== 'Event' && type !== 'RequestResponse' && type !== 'DryRun') {
      return awsError(c, 400, 'InvalidParameterValueException', `unsupported invocation type ${type}`);
    }
    if (random.float() < faults.throttleRate) {
      stats.throttled++;
      return awsError(c, 429, 'TooManyRequestsException', 'Rate Exceeded.');
    }
    if (random.float() < faults.errorRate) {
      stats.serverErrors++;
      const status = [500, 502, 503][random.int(3)];
      return awsError(c, status, 'ServiceException', `injected ${status}`);
    }
    const raw = await c.req.text();
    let event: unknown;
    try {
      event = raw === '' ? {} : JSON.parse(raw);
    } catch {
      return awsError(c, 400, 'InvalidRequestContentException', 'Could not parse request body into json');
    }
    if (type === 'DryRun') return c.body(null, 204);
    if (type === 'Event') {
      stats.accepted++;
      const duplicate = random.float() < faults.duplicateRate;
      pendingAsync += duplicate ? 2 : 1;
      void deliver(handler, event, false).then(() => {
        settleAsync();
        if (duplicate) void deliver(handler, event, true).then(settleAsync);
      });
      return c.body(null, 202);
    }
    if (running >= faults.concurrency) {
      stats.throttled++;
      return awsError(c, 429, 'TooManyRequestsException', 'Rate Exceeded.');
    }
    stats.accepted++;
    const result = await deliver(handler, event, false);
    c.header('X-Amz-Executed-Version', '$LATEST');
    if (!result.ok) {
      c.header('X-Amz-Function-Error', 'Unhandled');
      return c.json({ errorType: result.error.name, errorMessage: result.error.message }, 200);
    }
    return c.json(result.value ?? null, 200);
  });
  // Not part of Lambda's API: lets a client in another process (the benchmark) read the counters.
  app.get('/dev/stats', (c) => c.json({ ...stats, pendingAsync }));
  app.all('*', (c) => awsError(c, 404, 'UnknownOperationException', `not an invoke route: ${c.req.method} ${c.req.path}`));

  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    drained: () => (pendingAsync === 0 ? Promise.resolve() : new Promise((resolve) => drainWaiters.push(resolve))),
    close: () => new Promise((resolve, reject) => server.close((err) => (err ? reject(err) : resolve()))),
  };
}
