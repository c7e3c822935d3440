/**
 * `esopt api`: the HTTP API in this process over the embedded defaults — a filesystem store, runs
 * trained here (LocalRunLauncher), evaluations fanned out to the local worker pool, our own models
 * served by EngineModelServer — on a loopback port.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { pino, type Logger } from 'pino';
import type { CostPricesInput } from '../../shared/cost.ts';
import { measuredPrices } from '../fanout/measured-prices.ts';
import type { Fanout } from '../../shared/ports/fanout.ts';
import { localPool } from '../assembly/fanouts.ts';
import { storeAt } from '../assembly/stores.ts';
import { DEFAULT_RATE_LIMIT } from '../../functions/http-api/rate-limit.ts';
import { createApiApp } from '../../functions/http-api/app.ts';
import { InProcessEvaluations } from './in-process-evaluations.ts';
import { EngineModelServer } from './model-server.ts';
import { InProcessModelExports } from './local-model-exports.ts';
import { LocalRunLauncher } from './local-run-launcher.ts';

export interface LocalApiOptions {
  storeRoot: string;
  token: string;
  host?: string;
  port?: number;
  /** Worker processes an evaluation may use at most. */
  workers?: number;
  /** Any CostPrices fields; the rest are the list prices and the measured GPU share (trainer/fanout/measured-prices.ts). */
  prices?: Partial<CostPricesInput>;
  log?: Logger;
  eventPollMs?: number;
  /** The loop's collection poll (tests shorten it). */
  trainingPollMs?: number;
  /** A deployed stack's request checks (functions/http-api/request-choices.ts): `esopt api` off loopback. Default false. */
  deployed?: boolean;
}

export interface RunningApi {
  url: string;
  port: number;
  runs: LocalRunLauncher;
  evaluations: InProcessEvaluations;
  /** Waits for runs and evaluations in flight, then stops listening. */
  close(): Promise<void>;
}

export async function startLocalApi(o: LocalApiOptions): Promise<RunningApi> {
  const log = o.log ?? pino({ name: 'esopt-api' });
  const store = storeAt(o.storeRoot);
  const prices = measuredPrices(o.prices ?? {});
  const runs = new LocalRunLauncher({ store, storeRoot: o.storeRoot, log, pollMs: o.trainingPollMs });
  const evaluations = new InProcessEvaluations({
    store,
    prices,
    log,
    modelServer: new EngineModelServer(store),
    fanoutFor: (env): Fanout => localPool({ workers: o.workers ?? 4, store: { kind: 'fs', root: o.storeRoot }, env }),
  });
  const app = createApiApp({ store, token: o.token, runs, evaluations, exports: new InProcessModelExports(store), deployed: o.deployed ?? false, ...(o.deployed ? { rateLimit: DEFAULT_RATE_LIMIT } : {}), servesOwnModels: true, prices, log, eventPollMs: o.eventPollMs ?? 1000 });
  const host = o.host ?? '127.0.0.1';
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: host, port: o.port ?? 0 }, () => resolve(s));
    s.once('error', reject);
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${port}`,
    port,
    runs,
    evaluations,
    close: async () => {
      await Promise.all([runs.settled(), evaluations.settled()]);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
    },
  };
}
