/**
 * Starts the inference API on a loopback port (0 = pick a free one) with @hono/node-server; over TLS
 * when given an identity (tls-identity.ts), which the trainer box always is: its clients pin the certificate.
 */
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Engine } from '../engine/engine.ts';
import { createInferenceApp, type AppOptions } from './app.ts';
import { DEFAULT_BATCHING, InferenceService, type BatchingOptions } from './service.ts';
import type { TlsIdentity } from './tls-identity.ts';

export interface ServerOptions extends Partial<AppOptions> {
  host?: string;
  port?: number;
  batching?: Partial<BatchingOptions>;
  /** Serve HTTPS with this key and certificate. */
  tls?: TlsIdentity;
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
    const tls = options.tls ? { createServer: createHttpsServer, serverOptions: { key: options.tls.key, cert: options.tls.cert } } : {};
    const s = serve({ fetch: app.fetch, hostname: host, port: options.port ?? 0, ...tls }, () => resolve(s));
    s.once('error', reject);
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `${options.tls ? 'https' : 'http'}://${host}:${port}`,
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
