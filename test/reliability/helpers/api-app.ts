/**
 * The API app as the reliability suites drive it: the real hono app over a real filesystem store, with
 * the store-queue launchers the Lambda deployment uses (a started run or evaluation is a queue entry,
 * so thousands of valid bodies cost a few files each, not a training run), its pino log captured, and
 * its operations read from its own OpenAPI document so a new route is fuzzed and auth-checked unasked.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { pino } from 'pino';
import { CostPrices } from '../../../shared/cost.ts';
import { FsObjectStore } from '../../../shared/store/fs.ts';
import { createApiApp } from '../../../functions/http-api/app.ts';
import { storeQueueLaunchers } from '../../../functions/http-api/queued-launchers.ts';
import { MemorySecretStore } from '../../cloud/helpers/memory-secrets.ts';
import { measuredPrices } from '../../../trainer/fanout/measured-prices.ts';

export interface FuzzedApi {
  app: OpenAPIHono;
  store: FsObjectStore;
  root: string;
  /** Every line the app logged (pino JSON). */
  logs: string[];
  dispose(): void;
}

export function apiOverTempStore(token: string): FuzzedApi {
  const root = mkdtempSync(join(tmpdir(), 'esopt-reliability-api-'));
  const store = new FsObjectStore(root);
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      logs.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const app = createApiApp({
    store,
    token,
    ...storeQueueLaunchers(store, { secrets: new MemorySecretStore(), path: '/esopt/test/eval-keys' }),
    // As the Api function builds it: queued work, a deployed stack's refusals.
    deployed: true,
    servesOwnModels: true,
    prices: measuredPrices(),
    log: pino({ level: 'debug' }, sink),
    eventPollMs: 20,
  });
  return { app, store, root, logs, dispose: () => rmSync(root, { recursive: true, force: true }) };
}

export interface Operation {
  method: string;
  /** OpenAPI template, e.g. `/runs/{id}/stop`. */
  path: string;
  params: string[];
  hasBody: boolean;
  secured: boolean;
}

/** The operations of the app's own OpenAPI document. */
export async function operationsOf(app: OpenAPIHono): Promise<Operation[]> {
  const doc = (await (await app.request('/openapi.json')).json()) as {
    paths: Record<string, Record<string, { requestBody?: unknown; security?: unknown[] }>>;
  };
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({
      method: method.toUpperCase(),
      path,
      params: [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]),
      hasBody: op.requestBody !== undefined,
      secured: (op.security?.length ?? 0) > 0,
    })),
  );
}

/** The concrete URL path of an operation with these (already URL-safe) parameter values. */
export function pathWith(op: Operation, values: Record<string, string>): string {
  return op.path.replace(/\{(\w+)\}/g, (_, name: string) => values[name]);
}

/** Routes the app serves besides its documented operations (hono's own table, middleware left out). */
export function undocumentedRoutes(app: OpenAPIHono, ops: Operation[]): string[] {
  const documented = new Set(ops.map((o) => `${o.method} ${o.path.replace(/\{(\w+)\}/g, ':$1')}`));
  return [...new Set(app.routes.filter((r) => r.method !== 'ALL').map((r) => `${r.method} ${r.path}`))].filter((r) => !documented.has(r)).sort();
}
