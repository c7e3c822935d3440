/**
 * What each kind of queued work does on the trainer box, and the public port it serves on:
 *
 *   - a run trains with the in-process RunLauncher (LocalRunLauncher over the box wiring's run site), which
 *     writes the status, metrics and checkpoints where the API's readers look and honours the run's stop.json
 *     after the iteration in flight; the replica boxes follow it (`keys.activeRun()`);
 *   - an evaluation runs with the same runner the local API uses (trainer/jobs/evaluation-runner.ts), base
 *     models and checkpoints served on the box's public port with the stack's token; a keyed external
 *     endpoint's key stays in SSM, where the queue entry names it: the Episode function reads it, and the
 *     evaluation's end (or its being found not to be queued any more) deletes it;
 *   - a model export writes its directory (`esopt export` over the stack's bucket), serving nothing.
 *
 * Invariant: runs and evaluations serve on one loopback port with one token of this process, set up once
 * per box start (after the certificate the Episode function pins is published) before any work can need
 * them, and are reached only through the token gate (token-gate.ts) on the public port, which is open
 * exactly while one of them runs. The gate checks the stack's token, which the box follows in SSM when told
 * its parameter (token-follower.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { CostPricesInput } from '../../../shared/cost.ts';
import type { ExecutionProvider } from '../../../shared/execution-provider.ts';
import { keys } from '../../../shared/keys.ts';
import type { SecretStore } from '../../../shared/ports/secret-store.ts';
import { EvaluationStatus, type ActiveRun, type EvaluationKeyRef, type ModelExportRequest } from '../../../shared/schemas/index.ts';
import { tokenMatches } from '../../../shared/bearer-token.ts';
import { readJson, writeJson } from '../../../shared/store/json.ts';
import type { BoxWiring } from '../../assembly/wirings.ts';
import { measuredPrices } from '../../fanout/measured-prices.ts';
import { runEvaluation, type EvaluationRunnerDeps } from '../../jobs/evaluation-runner.ts';
import { EngineModelServer } from '../../jobs/model-server.ts';
import { LocalRunLauncher } from '../../jobs/local-run-launcher.ts';
import { exportFromStore, runModelExport, type ExportInto } from '../../jobs/model-export-job.ts';
import { freeLoopbackPort } from '../../serving/free-port.ts';
import { publishCertificate, type TlsIdentity } from '../../serving/tls-identity.ts';
import { startTokenGate, type RunningGate } from '../../serving/token-gate.ts';
import { TokenFollower, type TokenCheck } from '../../serving/token-follower.ts';
import { readStackPrices } from './stack-prices.ts';

/** The variable that holds the box's token in the Episode function (sst.config.ts). */
const WORKER_TOKEN_ENV = 'ESOPT_TRAINER_TOKEN';

/** What the jobs are given by the box's options (TrainerBoxOptions extends it). */
export interface BoxJobSettings {
  /** The box's inference server as the Episode function reaches it (the stack's trainerUrl). */
  publicUrl: string;
  /** Where the inference server listens (default 127.0.0.1; the box: 0.0.0.0, behind its security group). */
  host?: string;
  port: number;
  /** ESOPT_TOKEN on the box: the same TrainerToken secret the Episode function sends (the one it starts with). */
  token: string;
  /**
   * Follow the token in this SSM parameter (the stack's TrainerTokenParameter) through `secrets`: read every
   * `refreshMs` (default 60 s); a changed token replaces the old one, which stays accepted for `graceMs`
   * (default 10 min). Unset: `token` is the only one, for good.
   */
  tokenFollow?: { parameter: string; refreshMs?: number; graceMs?: number; missRefreshMs?: number };
  /** A running run's look for its stop.json. */
  stopPollMs?: number;
  /** The ES loop's collection poll. */
  trainingPollMs?: number;
  /**
   * Any CostPrices fields; the rest are the list prices and the measured GPU share (trainer/fanout/measured-prices.ts).
   * Unset: the stack's prices as its deploy wrote them to the bucket (stack/prices.json), else those defaults.
   */
  prices?: Partial<CostPricesInput>;
  /** onnxruntime's execution provider for every engine the box starts (default cpu). */
  executionProvider?: ExecutionProvider;
  /**
   * Serve inference over HTTPS with this identity; `start()` / `pollOnce()` first publish its certificate
   * in the bucket, where the Episode function reads the pin. Required when publicUrl is https.
   */
  tls?: TlsIdentity;
  /** Trainer replicas in the stack, this box included (ESOPT_REPLICAS): the replica boxes follow the run named in `keys.activeRun()`. */
  replicas?: number;
  /** Writes a queued model export's directory (default: `esopt export` over the stack's bucket). */
  exportInto?: ExportInto;
}

export interface BoxJobsOptions extends BoxJobSettings {
  /** Where the box's work runs: the stack's bucket, a site for each run and a fan-out for each evaluation. */
  wiring: BoxWiring;
  /** Where the followed token and queued evaluations' keys are. */
  secrets: SecretStore;
  log: Logger;
}

export class BoxJobs {
  private readonly store: BoxWiring['store'];
  private runs: LocalRunLauncher | null = null;
  private evaluations: EvaluationRunnerDeps | null = null;
  private readonly tokens: TokenCheck;
  private readonly follower: TokenFollower | null;
  private published: Promise<unknown> | undefined;
  /** The loopback port and token of the job's server, and what serves on it: set up by the first open(). */
  private opened: Promise<void> | undefined;
  /** The public port while a run or evaluation serves (a job's server used to hold it for as long). */
  private gate: RunningGate | null = null;
  private inner: { port: number; token: string } | null = null;

  constructor(private readonly o: BoxJobsOptions) {
    this.store = o.wiring.store;
    this.follower = o.tokenFollow
      ? new TokenFollower({ initial: o.token, read: () => o.secrets.get(o.tokenFollow!.parameter), ...o.tokenFollow, log: o.log })
      : null;
    this.tokens = this.follower ?? { accepts: async (given) => tokenMatches(given, o.token) };
  }

  /** Once per box start, before any work can need them: the certificate published, the servers set up. */
  async open(): Promise<void> {
    await this.publishCertificate();
    await this.openServers();
  }

  /** Once per box start: the certificate the Episode function pins, before any work can need it. */
  private publishCertificate(): Promise<unknown> {
    if (!this.o.tls) return Promise.resolve();
    this.published ??= publishCertificate(this.store, this.o.tls).then(
      (c) => this.o.log.info({ sha256: c.sha256 }, 'TLS certificate published'),
      (err: unknown) => {
        this.published = undefined;
        throw err;
      },
    );
    return this.published;
  }

  /**
   * The run launcher and model host, serving on a free loopback port with a token of this process behind
   * the gate: once per box start, before any work can need them.
   */
  private openServers(): Promise<void> {
    this.opened ??= (async () => {
      const o = this.o;
      const inner = { port: await freeLoopbackPort(), token: randomBytes(24).toString('hex') };
      this.inner = inner;
      this.follower?.start();
      const server = { host: '127.0.0.1', port: inner.port };
      this.runs = new LocalRunLauncher({
        store: this.store,
        log: o.log,
        token: inner.token,
        server,
        site: () => o.wiring.runSite(),
        stopPollMs: o.stopPollMs,
        pollMs: o.trainingPollMs,
        executionProvider: o.executionProvider,
        replicas: o.replicas,
      });
      this.evaluations = {
        store: this.store,
        secrets: o.secrets,
        prices: measuredPrices(o.prices ?? (await readStackPrices(this.store)) ?? {}),
        log: o.log,
        modelServer: new EngineModelServer(this.store, {
          serving: { ...server, publicUrl: o.publicUrl, token: inner.token, tokenEnv: WORKER_TOKEN_ENV },
          executionProvider: o.executionProvider,
        }),
        // The Episode function has its own environment: nothing can be handed to it per evaluation.
        fanoutFor: () => o.wiring.evaluationFanout(),
      };
    })().catch((err: unknown) => {
      this.opened = undefined;
      throw err;
    });
    return this.opened;
  }

  /** The public port while a job serves on it, else null. */
  get port(): number | null {
    return this.gate?.port ?? null;
  }

  /** Runs a job with the gate open on the public port, passing to the job's server. */
  private async gated(job: () => Promise<void>): Promise<void> {
    const o = this.o;
    this.gate = await startTokenGate({ host: o.host ?? '127.0.0.1', port: o.port, tls: o.tls, tokens: this.tokens, upstream: this.inner! });
    try {
      await job();
    } finally {
      await this.gate.close();
      this.gate = null;
    }
  }

  /** Trains run `id` until it ends or is stopped; `closing`: the box is stopping, so it ends after its first iteration. */
  run(id: string, closing: () => boolean): Promise<void> {
    return this.gated(async () => {
      // The replica boxes follow whichever run this box trains (trainer/cloud/box/replica-box.ts).
      const active: ActiveRun = { run: id, startedAt: new Date().toISOString() };
      await writeJson(this.store, keys.activeRun(), active);
      await this.runs!.start(id);
      // close() came while this run was being claimed: it too ends after its first iteration.
      if (closing()) await this.runs!.stop(id);
      await this.runs!.settled();
    });
  }

  /** Runs evaluation `id` if it is still queued; its key, if any, is deleted however it ends. */
  evaluation(id: string, apiKeyRef: EvaluationKeyRef | undefined): Promise<void> {
    return this.gated(async () => {
      const status = await readJson(this.store, keys.evaluationStatus(id), EvaluationStatus);
      if (status?.state !== 'queued') {
        this.o.log.info({ evaluation: id, state: status?.state ?? 'missing' }, 'evaluation is not queued; not run');
        if (apiKeyRef) await this.o.secrets.delete(apiKeyRef.parameter);
        return;
      }
      // The runner deletes the key when the evaluation ends, however it ends.
      await runEvaluation(this.evaluations!, id, apiKeyRef ? { apiKeyRef } : {});
    });
  }

  /** Deletes an evaluation's key (a no-op for an evaluation without one, or a key deleted already). */
  async deleteKey(apiKeyRef: EvaluationKeyRef | undefined): Promise<void> {
    if (apiKeyRef) await this.o.secrets.delete(apiKeyRef.parameter);
  }

  /** Writes export `id`'s directory; it needs neither the GPU nor the public port. */
  async export(id: string, request: ModelExportRequest | undefined): Promise<void> {
    if (!request) throw new Error(`queued export ${id} names no run, iteration and format`);
    const status = await runModelExport(this.store, request, this.o.exportInto ?? exportFromStore(this.store));
    this.o.log.info({ export: id, ...request, state: status.state, bytes: status.bytes, error: status.error }, 'model export');
  }

  /** Asks run `id` to stop after the iteration in flight. */
  async stopRun(id: string): Promise<void> {
    await this.runs?.stop(id);
  }

  /** Waits for the runs to end, then stops following the token. */
  async close(): Promise<void> {
    await this.runs?.settled();
    this.follower?.close();
  }
}
