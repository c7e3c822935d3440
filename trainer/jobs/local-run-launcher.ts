/**
 * The RunLauncher that trains in this process: starts `runEmbedded` (the same wiring `esopt train`
 * uses: engine, inference server, a {store, fanout} site, ES loop) for a run the API put in the store.
 * The local API gives it the local site over its store directory; the trainer box's poller
 * (cloud/box/trainer-box.ts) gives it the stack's S3 bucket and Episode function.
 *
 * Stop: the loop calls its progress hook right after an iteration's metrics row is written; when a stop
 * was asked for (by this process, or a stop.json another API instance wrote) that hook throws
 * StopRequested, so train() ends there: the iteration is complete in the store and the run can be resumed.
 * A run whose stop.json is there before it starts is marked stopped without training.
 *
 * Resume: a run that ended and is `requested` again (functions/http-api/run-resume.ts) starts like a new
 * one; the loop finds its checkpoint and log in the store and goes on from there.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { keys } from '../../shared/keys.ts';
import type { RunLauncher } from '../../shared/ports/launchers.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';
import { RunStatus, type RunConfig } from '../../shared/schemas/index.ts';
import { embeddedWiring } from '../assembly/wirings.ts';
import { runEmbedded } from '../assembly/run.ts';
import type { Site } from '../assembly/site.ts';
import type { TlsIdentity } from '../serving/tls-identity.ts';
import { readRunConfig } from '../training/loop/index.ts';
import type { ExecutionProvider } from '../../shared/execution-provider.ts';

export class StopRequested extends Error {
  constructor(readonly iteration: number) {
    super(`stopped after iteration ${iteration} on request`);
  }
}

interface LauncherOptionsCommon {
  store: ObjectStore;
  log: Logger;
  /** How often a running run looks for a stop.json written elsewhere. */
  stopPollMs?: number;
  pollMs?: number;
  /** The inference server's bearer token; default a fresh one per run (nothing but this run's local workers need it). */
  token?: string;
  /** Where the inference server listens; remote workers need a reachable address. */
  server?: { host?: string; port?: number; tls?: TlsIdentity };
  executionProvider?: ExecutionProvider;
  /** Trainer replicas in all, this process included: a model run waits for the other replicas' θ_0 (trainer/training/loop/replica-set.ts). */
  replicas?: number;
}

/**
 * `storeRoot`: the local site over that directory (the same one `store` is opened on), its
 * workers given the run's token. `site`: a fresh Site for each run, over the same store.
 */
export type LocalRunLauncherOptions = LauncherOptionsCommon & ({ storeRoot: string; site?: never } | { site: (config: RunConfig) => Site; storeRoot?: never });

const FINAL = new Set<RunStatus['state']>(['finished', 'stopped', 'failed']);

export class LocalRunLauncher implements RunLauncher {
  private readonly stops = new Set<string>();
  private readonly running = new Map<string, Promise<void>>();

  constructor(private readonly o: LocalRunLauncherOptions) {}

  private async readStatus(run: string): Promise<RunStatus | null> {
    return readJson(this.o.store, keys.runStatus(run), RunStatus);
  }

  private async setStatus(run: string, patch: Partial<RunStatus>): Promise<void> {
    const now = new Date().toISOString();
    const current = (await this.readStatus(run)) ?? { run, state: 'requested' as const, requestedAt: now, startedAt: null, finishedAt: null, error: null, updatedAt: now };
    const next = RunStatus.parse({ ...current, ...patch, updatedAt: now });
    await writeJson(this.o.store, keys.runStatus(run), next);
  }

  async start(run: string): Promise<void> {
    const ending = this.running.get(run);
    if (ending) {
      // `requested` while its job is still here: resumed (POST /runs/{id}/resume) as that job was ending.
      if ((await this.readStatus(run))?.state !== 'requested') return;
      await ending;
      if (this.running.has(run)) return;
    }
    const config = await readRunConfig(this.o.store, run);
    if (!config) throw new Error(`run ${run} has no config in the store`);
    const status = await this.readStatus(run);
    if (status && FINAL.has(status.state)) {
      this.o.log.info({ run, state: status.state }, 'run is over already; not started');
      return;
    }
    if ((await this.o.store.get(keys.stopRequest(run))) !== null) {
      await this.setStatus(run, { state: 'stopped', finishedAt: new Date().toISOString() });
      this.o.log.info({ run }, 'stop requested before the run started; not started');
      return;
    }
    await this.setStatus(run, { state: 'running', startedAt: new Date().toISOString() });
    const watcher = setInterval(() => {
      void this.o.store.get(keys.stopRequest(run)).then((b) => b && this.stops.add(run), () => {});
    }, this.o.stopPollMs ?? 1000);
    // A per-run token keeps the loopback inference server closed to anything but this run's workers.
    const token = this.o.token ?? randomBytes(24).toString('hex');
    const site = this.o.site ? this.o.site(config) : (await embeddedWiring(this.o.storeRoot, token).open(config)).site;
    const job = runEmbedded({
      config,
      run,
      site,
      token,
      server: this.o.server,
      executionProvider: this.o.executionProvider,
      pollMs: this.o.pollMs,
      ...((this.o.replicas ?? 1) > 1 && config.policy === 'model'
        ? { replicas: { syncTimeoutMs: Math.min(config.deadlineMs, 60_000), expected: this.o.replicas! - 1, onLost: (lost: { iteration: number; replica: string }) => this.o.log.info({ run, ...lost }, 'replica did not report θ in time: dropped until it catches up') } }
        : {}),
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
      .then(({ result }) =>
        this.setStatus(run, result.stoppedBy ? { state: 'stopped', stopReason: result.stoppedBy.detail, finishedAt: new Date().toISOString() } : { state: 'finished', finishedAt: new Date().toISOString() }),
      )
      .catch(async (err) => {
        const stopped = err instanceof StopRequested;
        if (!stopped) this.o.log.error({ run, error: (err as Error).message }, 'run failed');
        await this.setStatus(run, { state: stopped ? 'stopped' : 'failed', error: stopped ? null : String((err as Error).message).slice(0, 4000), ...(stopped ? { stopReason: 'requested' } : {}), finishedAt: new Date().toISOString() });
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
