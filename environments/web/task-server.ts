/**
 * The local task server: a hono app on 127.0.0.1 (random port) that generates and serves each task
 * page from its type and seed. Pages are regenerated on every request (generation is pure), so the
 * server holds no state and one server serves every episode of the process.
 */
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { SeededRandom } from '../random.ts';
import { pageDocument } from './page-document.ts';
import { taskType } from './task-types/index.ts';
import { WebTask } from './task.ts';

export function taskApp(): Hono {
  const app = new Hono();
  app.get('/task/:type/:seed', (c) => {
    const parsed = WebTask.safeParse({ type: c.req.param('type'), seed: Number(c.req.param('seed')) });
    if (!parsed.success) return c.text(`no such task: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`, 404);
    const { page } = taskType(parsed.data.type).generate(new SeededRandom(parsed.data.seed));
    return c.html(pageDocument(page));
  });
  return app;
}

export interface TaskServer {
  /** http://127.0.0.1:PORT — the only origin task pages may reach. */
  readonly origin: string;
  urlOf(task: WebTask): string;
  close(): Promise<void>;
}

export async function startTaskServer(): Promise<TaskServer> {
  const app = taskApp();
  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
    s.once('error', reject);
  });
  // The server alone never keeps the process alive: a CLI run ends when its episodes do.
  server.unref();
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    urlOf: (task) => `${origin}/task/${task.type}/${task.seed}`,
    close: () =>
      new Promise<void>((resolve) => {
        if ('closeAllConnections' in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
