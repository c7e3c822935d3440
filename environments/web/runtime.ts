/**
 * What web episodes of one process share: the task server and the browsers (one per backend and
 * executable). Created on first use and kept, so a warm worker (a reused Lambda, a pool process)
 * pays for Chromium's start once; `closeWebRuntime` frees everything.
 */
import type { WebBackend } from './backend.ts';
import { ChromiumBackend } from './chromium-backend.ts';
import { chooseChromium, chromiumKey } from './chromium-executable.ts';
import { HappyDomBackend } from './happy-dom-backend.ts';
import { startTaskServer, type TaskServer } from './task-server.ts';
import type { WebOptions } from './task.ts';

let server: Promise<TaskServer> | undefined;
const backends = new Map<string, WebBackend>();

export function taskServer(): Promise<TaskServer> {
  server ??= startTaskServer().catch((err) => {
    server = undefined;
    throw err;
  });
  return server;
}

export function webBackend(options: Pick<WebOptions, 'backend' | 'executablePath'>): WebBackend {
  const key = options.backend === 'chromium' ? `chromium:${chromiumKey(chooseChromium(options.executablePath))}` : 'happy-dom';
  let backend = backends.get(key);
  if (!backend) {
    backend = options.backend === 'chromium' ? new ChromiumBackend(options.executablePath) : new HappyDomBackend();
    backends.set(key, backend);
  }
  return backend;
}

export async function closeWebRuntime(): Promise<void> {
  const all = [...backends.values()];
  backends.clear();
  await Promise.all(all.map((b) => b.close()));
  const s = server;
  server = undefined;
  await (await s?.catch(() => undefined))?.close();
}
