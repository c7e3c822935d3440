import { Worker, type WorkerOptions } from 'node:worker_threads';

const BOOTSTRAP = new URL('./ts-thread-bootstrap.mjs', import.meta.url);

/**
 * Start a thread whose entry is a TypeScript module, under the CLI (tsx) and inside vitest alike.
 * The entry reads its own data from `workerData.data`.
 */
export function startTsThread(entry: URL, data?: unknown, options: Omit<WorkerOptions, 'workerData'> = {}): Worker {
  return new Worker(BOOTSTRAP, { ...options, workerData: { entry: entry.href, data } });
}
