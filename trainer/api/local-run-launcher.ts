/**
 * The RunLauncher of the local API: starts `runEmbedded` (the same wiring `esopt train` uses: engine,
 * inference server, local worker pool, ES loop) in this process for a run the API put in the store.
 *
 * Stop: the loop calls its progress hook right after an iteration's metrics row is written; when a stop
 * was asked for (by this process, or a stop.json another API instance wrote) that hook throws
 * StopRequested, so train() ends there: the iteration is complete in the store and the run can be resumed.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { keys } from '../../shared/keys.ts';
import type { RunLauncher } from '../../shared/ports/launchers.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { RunStatus } from '../../shared/schemas/index.ts';
import { runEmbedded } from '../loop/embedded-run.ts';
import { readRunConfig } from '../loop/training.ts';

export class StopRequested extends Error {
  constructor(readonly iteration: number) {
    super(`stopped after iteration ${iteration} on request`);
  }
}

export interface LocalRunLauncherOptions {
  store: ObjectStore;
  /** The FsObjectStore's root: runEmbedded opens the same directory for the loop and its workers. */
  storeRoot: string;
  log: Logger;
  /** How often a running run looks for a stop.json written elsewhere. */
  stopPollMs?: number;
  pollMs?: number;
}

export class LocalRunLauncher implements RunLauncher {
  private readonly stops = new Set<string>();
  private readonly running = new Map<string, Promise<void>>();

  constructor(private readonly o: LocalRunLauncherOptions) {}

  private async setStatus(run: string, patch: Partial<RunStatus>): Promise<void> {
    const body = await this.o.store.get(keys.runStatus(run));
    const now = new Date().toISOString();
    const current = body ? RunStatus.parse(JSON.parse(new TextDecoder().decode(body))) : { run, state: 'requested' as const, requestedAt: now, startedAt: null, finishedAt: null, error: null, updatedAt: now };
    const next = RunStatus.parse({ ...current, ...patch, updatedAt: now });
    await this.o.store.put(keys.runStatus(run), JSON.stringify(next), { contentType: 'application/json' });
  }

  async start(run: string): Promise<void> {
    if (this.running.has(run)) return;
    const config = await readRunConfig(this.o.store, run);
    if (!config) throw new Error(`run ${run} has no config in the store`);
    await this.setStatus(run, { state: 'running', startedAt: new Date().toISOString() });
    const watcher = setInterval(() => {
      void this.o.store.get(keys.stopRequest(run)).then((b) => b && this.stops.add(run), () => {});
    }, this.o.stopPollMs ?? 1000);
    const job = runEmbedded({
      config,
      run,
      storeRoot: this.o.storeRoot,
      // A per-run token keeps the loopback inference server closed to anything but this run's workers.
      token: randomBytes(24).toString('hex'),
      pollMs: this.o.pollMs,
      progress: {
        start: () => {},
        evaluation: () => {},
        stop: () => {},
        iteration: (row) => {
          this.o.log.info({ run, iteration: row.iteration, meanReward: row.meanReward }, 'iteration done');
          if (this.stops.has(run) && row.iteration + 1 < config.iterations) throw new StopRequested(row.iteration);
        },
      },
    })
      .then(() => this.setStatus(run, { state: 'finished', finishedAt: new Date().toISOString() }))
      .catch(async (err) => {
        const stopped = err instanceof StopRequested;
        if (!stopped) this.o.log.error({ run, error: (err as Error).message }, 'run failed');
        await this.setStatus(run, { state: stopped ? 'stopped' : 'failed', error: stopped ? null : String((err as Error).message).slice(0, 4000), finishedAt: new Date().toISOString() });
      })
      .finally(() => {
        clearInterval(watcher);
        this.running.delete(run);
        this.stops.delete(run);
      });
    this.running.set(run, job);
  }

  async stop(run: string): Promise<void> {
    if (this.running.has(run)) this.stops.add(run);
  }

  /** Resolves when every run started so far has ended. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()]);
  }
}
