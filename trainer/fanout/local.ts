/**
 * The embedded Fanout: a pool of child processes, each running the Episode function's handler (the
 * same code Lambda runs). A request that outlives its timeout, or a dispatch whose signal aborts, has
 * its process killed: an environment stuck in a loop cannot hold the pool. Killed workers are
 * replaced on the next use.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { DispatchOptions, DispatchOutcome, Fanout } from '../../shared/ports/fanout.ts';
import type { EpisodeRequest } from '../../shared/schemas/index.ts';
import type { StoreSpecInput } from '../../shared/store/store-spec.ts';
import { failAll, mapWithConcurrency, outcomesFromResponse, toBatches, toEvent } from './batches.ts';
import { WorkerReady, WorkerReply } from './local-protocol.ts';

export interface LocalFanoutOptions {
  /** Worker processes at most; a dispatch uses min(workers, concurrency) of them. */
  workers: number;
  /** The store the workers write rewards to: the one the trainer reads. */
  store: StoreSpecInput;
  episodesPerInvocation?: number;
  /** Extra environment for the workers (e.g. the variable a policy's `tokenEnv` names). */
  env?: Record<string, string>;
}

const WORKER = fileURLToPath(new URL('./local-worker.ts', import.meta.url));

class Worker {
  private nextId = 0;
  private readonly ready: Promise<void>;
  private exited: Error | null = null;
  private readonly waiting = new Map<number, (reply: WorkerReply | Error) => void>();

  constructor(readonly child: ChildProcess) {
    this.ready = new Promise((resolve, reject) => {
      child.on('message', (raw) => {
        if (WorkerReady.safeParse(raw).success) return resolve();
        const reply = WorkerReply.safeParse(raw);
        if (!reply.success) return;
        this.waiting.get(reply.data.id)?.(reply.data);
        this.waiting.delete(reply.data.id);
      });
      child.on('exit', (code, signal) => {
        this.exited = new Error(`worker exited (${signal ?? `code ${code}`})`);
        reject(this.exited);
        for (const settle of this.waiting.values()) settle(this.exited);
        this.waiting.clear();
      });
    });
    this.ready.catch(() => {});
  }

  whenReady(): Promise<void> {
    return this.ready;
  }

  get alive(): boolean {
    return this.exited === null;
  }

  async run(event: unknown): Promise<WorkerReply | Error> {
    // A worker killed while still starting (a timeout, a cancel) answers with why it exited.
    const failed = await this.ready.then(() => null, (err: Error) => err);
    if (failed) return failed;
    if (this.exited) return this.exited;
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      // With a callback a failed send (a worker that died meanwhile: EPIPE) is this request's error,
      // not an 'error' event that would take the whole pool down.
      this.child.send({ id, event }, (err) => {
        if (!err || !this.waiting.has(id)) return;
        this.waiting.delete(id);
        resolve(err);
      });
    });
  }

  kill(): void {
    if (!this.alive) return;
    // Dead from now on, not from the 'exit' event: nothing may be sent to it in between.
    this.exited = new Error('worker killed');
    this.child.kill('SIGKILL');
  }
}

export class LocalFanout implements Fanout {
  private readonly idle: Worker[] = [];
  private readonly all = new Set<Worker>();
  private closed = false;

  constructor(private readonly options: LocalFanoutOptions) {
    if (!Number.isInteger(options.workers) || options.workers < 1) throw new Error(`workers must be a positive integer (got ${options.workers})`);
  }

  private spawn(): Worker {
    const child = fork(WORKER, [], {
      execArgv: ['--import', 'tsx'],
      env: { ...process.env, ...this.options.env, ESOPT_WORKER_STORE: JSON.stringify(this.options.store) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const worker = new Worker(child);
    this.all.add(worker);
    child.on('exit', () => this.all.delete(worker));
    return worker;
  }

  /** Starts the worker processes ahead of the first dispatch (they take a moment to load). */
  async warm(n = this.options.workers): Promise<void> {
    while (this.all.size < n) this.idle.push(this.spawn());
    await Promise.all(this.idle.map((w) => w.whenReady()));
  }

  async dispatch(requests: EpisodeRequest[], options: DispatchOptions): Promise<DispatchOutcome[]> {
    if (this.closed) throw new Error('the local fan-out is closed');
    const { signal, timeoutMs } = options;
    const lanes = Math.min(options.concurrency, this.options.workers);
    const batches = toBatches(requests, this.options.episodesPerInvocation ?? 1);
    const busy = new Set<Worker>();
    const onAbort = () => busy.forEach((w) => w.kill());
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const results = await mapWithConcurrency(
        batches,
        lanes,
        async (batch) => {
          let worker = this.idle.pop();
          while (worker && !worker.alive) worker = this.idle.pop();
          worker ??= this.spawn();
          busy.add(worker);
          // The clock starts once the worker has loaded: process start-up is not the episode's time.
          await worker.whenReady().catch(() => {});
          let timedOut = false;
          const timer = setTimeout(() => {
            timedOut = true;
            worker.kill();
          }, timeoutMs);
          const reply = await worker.run(toEvent(batch));
          clearTimeout(timer);
          busy.delete(worker);
          if (worker.alive) this.idle.push(worker);
          if (timedOut) return failAll(batch, `timed out after ${timeoutMs} ms: the worker was killed`, true);
          if (signal?.aborted) return failAll(batch, 'cancelled: the worker was killed', true);
          if (reply instanceof Error) return failAll(batch, reply.message);
          if ('crash' in reply) return failAll(batch, `the handler threw: ${reply.crash.slice(0, 1500)}`);
          return outcomesFromResponse(batch, reply.response);
        },
        (batch) => failAll(batch, 'cancelled before it started', true),
        signal,
      );
      return results.flat();
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const exits = [...this.all].map((w) => new Promise<void>((resolve) => (w.alive ? w.child.once('exit', () => resolve()) : resolve())));
    this.all.forEach((w) => w.kill());
    this.idle.length = 0;
    await Promise.all(exits);
  }
}
