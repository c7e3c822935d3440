/** Starts the inference API on a loopback port (0 = pick a free one) with @hono/node-server. */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Engine } from '../engine.ts';
import { createInferenceApp, type AppOptions } from './app.ts';
import { DEFAULT_BATCHING, InferenceService, type BatchingOptions } from './service.ts';

export interface ServerOptions extends Partial<AppOptions> {
  host?: string;
  port?: number;
  batching?: Partial<BatchingOptions>;
}

export interface RunningServer {
  url: string;
  port: number;
  service: InferenceService;
  close(): Promise<void>;
}

export async function startInferenceServer(engine: Engine, options: ServerOptions = {}): Promise<RunningServer> {
  const service = new InferenceService(engine, { ...DEFAULT_BATCHING, ...options.batching });
  const app = createInferenceApp(service, {
    token: options.token,
    requestTimeoutMs: options.requestTimeoutMs ?? 120_000,
    defaultMaxTokens: options.defaultMaxTokens ?? 256,
    contextPolicy: options.contextPolicy ?? 'error',
  });
  const host = options.host ?? '127.0.0.1';
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: host, port: options.port ?? 0 }, () => resolve(s));
    s.once('error', reject);
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${port}`,
    port,
    service,
    close: async () => {
      service.batcher.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Keep-alive sockets of finished clients would hold close() open.
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
    },
  };
}
