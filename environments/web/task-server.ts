/**
 * The local task server: a hono app on 127.0.0.1 (random port) that generates and serves each task
 * page from its type and seed. Pages are regenerated on every request (generation is pure), so the
 * server holds no state and one server serves every episode of the process.
 */
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { SeededRandom } from '../random.ts';
import { pageDocument } from './page-document.ts';
import { taskType } from './task-types/index.ts';
import { GeneratedWebTask } from './task.ts';
import { folderFile } from './task-folder.ts';

export function taskApp(folders: Map<string, string> = new Map()): Hono {
  const app = new Hono();
  // A mounted task folder's files, as they are (task-folder.ts keeps requests inside it).
  app.get('/folders/:id/*', async (c) => {
    const dir = folders.get(c.req.param('id'));
    if (!dir) return c.text('no such folder', 404);
    const file = await folderFile(dir, c.req.path.slice(`/folders/${c.req.param('id')}/`.length));
    return file ? c.body(file.body, 200, { 'content-type': file.contentType }) : c.text('no such file', 404);
  });
  app.get('/task/:type/:seed', (c) => {
    const parsed = GeneratedWebTask.safeParse({ type: c.req.param('type'), seed: Number(c.req.param('seed')) });
    if (!parsed.success) return c.text(`no such task: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`, 404);
    const { page } = taskType(parsed.data.type).generate(new SeededRandom(parsed.data.seed));
    return c.html(pageDocument(page));
  });
  return app;
}

export interface TaskServer {
  /** http://127.0.0.1:PORT — the only origin task pages may reach. */
  readonly origin: string;
  urlOf(task: GeneratedWebTask): string;
  /** Serves `dir` under this origin (once per folder); the URL its files are under, ending in `/`. */
  mount(dir: string): string;
  close(): Promise<void>;
}

export async function startTaskServer(): Promise<TaskServer> {
  const folders = new Map<string, string>();
  const app = taskApp(folders);
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
    mount(dir) {
      const id = createHash('sha256').update(resolve(dir)).digest('hex').slice(0, 16);
      folders.set(id, resolve(dir));
      return `${origin}/folders/${id}/`;
    },
    close: () =>
      new Promise<void>((resolve) => {
        if ('closeAllConnections' in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
