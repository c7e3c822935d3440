/**
 * The trainer box's side of the cloud API: the Api function only writes (a run's config, an
 * evaluation's request, and a QueuedWork entry under `queue/`), and this poller lists that prefix,
 * claims each entry exactly once and runs it here, through the stack's S3 bucket and Episode function:
 *
 *   - a run with the in-process RunLauncher (LocalRunLauncher over the cloud site), which writes
 *     the status, metrics and checkpoints where the API's readers look and honours the run's stop.json
 *     after the iteration in flight;
 *   - an evaluation with the same runner the local API uses (trainer/jobs/evaluation-runner.ts),
 *     base models and checkpoints served on the box's public port with the stack's token; a keyed
 *     external endpoint's key stays in SSM, where the queue entry names it: the Episode function reads
 *     it, and this box deletes it when the evaluation ends (or is found not to be queued any more).
 *
 * One job at a time, oldest first: the box has one GPU and one public inference port. That port is the
 * token gate (token-gate.ts): it checks the stack's token, which the box follows in SSM when told its
 * parameter (token-follower.ts), and passes each request to the job's server on a loopback port.
 *
 * Idle stop: with `idleMinutes` > 0, a box with no work running and none queued for that long calls
 * `stopSelf` (EC2 StopInstances on its own instance), once the queue, listed again, is still empty; the
 * Api function starts the instance when it queues work (functions/http-api/box-wake.ts).
 *
 * Claims are create-only objects at `keys.workClaim(kind, id)`, so a request seen twice (a second
 * listing, a second entry for the same id, two boxes polling) runs once. AWS S3 decides a create-only
 * write atomically (If-None-Match); for servers that ignore it, each claim carries a random id that is
 * read back after `claimSettleMs`, and only the writer whose claim survived runs the work.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino, type Logger } from 'pino';
import type { CostPricesInput } from '../../../shared/cost.ts';
import { measuredPrices } from '../../fanout/measured-prices.ts';
import { readStackPrices } from './stack-prices.ts';
import { keys, parseQueuedWorkKey } from '../../../shared/keys.ts';
import type { Fanout } from '../../../shared/ports/fanout.ts';
import type { SecretStore } from '../../../shared/ports/secret-store.ts';
import { SsmSecretStore } from '../../../shared/secrets/ssm.ts';
import type { S3ObjectStore } from '../../../shared/store/s3.ts';
import { ArtifactPointer, EvaluationStatus, MetricsRow, QueuedWork, RunStatus, WorkClaim, type ActiveRun, type EvaluationKeyRef, type ModelExportRequest, type WorkKind } from '../../../shared/schemas/index.ts';
import { runEvaluation, type EvaluationRunnerDeps } from '../../jobs/evaluation-runner.ts';
import { readJson, writeJson } from '../../../functions/http-api/store-json.ts';
import { openCloudStore, type CloudStack } from '../../assembly/cloud-stack.ts';
import { cloudSite } from '../../assembly/cloud-stack.ts';
import { publishCertificate, type TlsIdentity } from '../../serving/tls-identity.ts';
import { idleStopDue } from './idle-stop.ts';
import { EngineModelServer } from '../../jobs/model-server.ts';
import { LocalRunLauncher } from '../../jobs/local-run-launcher.ts';
import { startTokenGate, type RunningGate } from '../../serving/token-gate.ts';
import { freeLoopbackPort } from '../../serving/free-port.ts';
import { TokenFollower, type TokenCheck } from '../../serving/token-follower.ts';
import { tokenMatches } from '../../../shared/bearer-token.ts';
import { exportFromStore, runModelExport, type ExportInto } from '../../jobs/model-export-job.ts';
import type { ExecutionProvider } from '../../../shared/execution-provider.ts';

/** The variable that holds the box's token in the Episode function (sst.config.ts). */
const WORKER_TOKEN_ENV = 'ESOPT_TRAINER_TOKEN';
/** Sorts after every ISO time: an entry that cannot be read (or is gone) is tried last. */
const UNKNOWN_TIME = '~';

export interface TrainerBoxOptions {
  cloud: CloudStack;
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
  /** Stop the instance after this many minutes with no work running or queued (0 or unset: never). */
  idleMinutes?: number;
  /** What an idle stop does (EC2 StopInstances on this instance); required when idleMinutes > 0. */
  stopSelf?: () => Promise<void>;
  /** How often the queue is listed while idle. */
  pollMs?: number;
  /** A run claimed on another host with no sign of life this long is marked failed (default 6 h). */
  staleAfterMs?: number;
  /** How long a claim is left before it is read back (see above). */
  claimSettleMs?: number;
  /** A running run's look for its stop.json. */
  stopPollMs?: number;
  /** The ES loop's collection poll. */
  trainingPollMs?: number;
  /**
   * Any CostPrices fields; the rest are the list prices and the measured GPU share (trainer/fanout/measured-prices.ts).
   * Unset: the stack's prices as its deploy wrote them to the bucket (stack/prices.json), else those defaults.
   */
  prices?: Partial<CostPricesInput>;
  log?: Logger;
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
  /** Where queued evaluations' keys are, to delete them (default: SSM in the stack's region). */
  secrets?: SecretStore;
  /**
   * The artifact this process runs (ESOPT_ARTIFACT_SHA256, written at install): when the stack's pointer
   * (`keys.artifactPointer()`) names another, the box hands over — the run in flight stops after its
   * iteration and goes back to the queue, nothing new is claimed — and `handedOver` resolves, so the
   * service can exit and be restarted into the new code, which resumes the run from its log.
   */
  artifactSha256?: string;
  /** An artifact whose install failed on this box (ESOPT_ARTIFACT_SKIP): named by the pointer, it is not handed over to. */
  skipArtifactSha256?: string;
  /** How often the pointer is read (default: pollMs). */
  updatePollMs?: number;
}

/** A run claimed on another host with no sign of life this long is taken for dead (longer than any iteration). */
export const DEFAULT_STALE_AFTER_MS = 6 * 3_600_000;

/** Whether a process of this host exists (signal 0 checks without sending; EPERM: it exists, not ours). */
function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export interface RanWork {
  kind: WorkKind;
  id: string;
}

export class TrainerBox {
  readonly store: S3ObjectStore;
  private readonly log: Logger;
  private runs: LocalRunLauncher | null = null;
  private evaluations: EvaluationRunnerDeps | null = null;
  private readonly tokens: TokenCheck;
  private readonly follower: TokenFollower | null;
  /** The loopback port and token of the job's server, and what serves on it: set up by the first poll. */
  private opened: Promise<void> | undefined;
  /** The public port while a run or evaluation serves (a job's server used to hold it for as long). */
  private gate: RunningGate | null = null;
  private inner: { port: number; token: string } | null = null;
  /** When work last ran or was seen queued; the idle stop counts from here. */
  private lastBusyAt = Date.now();
  private exporting = 0;
  private stopAsked = false;
  private readonly secrets: SecretStore;
  /** The SSM client this box opened itself (none when the options gave a store), closed with it. */
  private readonly ownSecrets: SsmSecretStore | null;
  private readonly who = `${hostname()}:${process.pid}`;
  private closing = false;
  private current: RanWork | null = null;
  private loop: Promise<void> | null = null;
  private readonly wake = new AbortController();
  private updateWatch: NodeJS.Timeout | null = null;
  /** The artifact being handed over to, once the pointer named one. */
  private handingOverTo: string | null = null;
  private handOver!: (sha256: string) => void;
  /** Resolves with the new artifact's SHA-256 when the box has handed over (its run back in the queue). */
  readonly handedOver = new Promise<string>((resolve) => (this.handOver = resolve));

  constructor(private readonly o: TrainerBoxOptions) {
    this.store = openCloudStore(o.cloud);
    this.ownSecrets = o.secrets ? null : new SsmSecretStore({ region: o.cloud.region });
    this.secrets = o.secrets ?? this.ownSecrets!;
    this.log = o.log ?? pino({ name: 'esopt-trainer-box' });
    if (o.publicUrl.startsWith('https:') !== Boolean(o.tls)) throw new Error(`the public URL ${o.publicUrl} and the server must agree: https with a TLS identity, http without`);
    if ((o.idleMinutes ?? 0) > 0 && !o.stopSelf) throw new Error('idleMinutes > 0 needs stopSelf (what stops this instance)');
    this.follower = o.tokenFollow
      ? new TokenFollower({ initial: o.token, read: () => this.secrets.get(o.tokenFollow!.parameter), ...o.tokenFollow, log: this.log })
      : null;
    this.tokens = this.follower ?? { accepts: async (given) => tokenMatches(given, o.token) };
  }

  /**
   * The run launcher and model host, serving on a free loopback port with a token of this process behind
   * the gate: once per box start, before any work can need them.
   */
  private open(): Promise<void> {
    this.opened ??= (async () => {
      const o = this.o;
      const inner = { port: await freeLoopbackPort(), token: randomBytes(24).toString('hex') };
      this.inner = inner;
      this.follower?.start();
      const server = { host: '127.0.0.1', port: inner.port };
      this.runs = new LocalRunLauncher({
        store: this.store,
        log: this.log,
        token: inner.token,
        server,
        site: () => cloudSite(o.cloud, o.publicUrl),
        stopPollMs: o.stopPollMs,
        pollMs: o.trainingPollMs,
        executionProvider: o.executionProvider,
        replicas: o.replicas,
      });
      this.evaluations = {
        store: this.store,
        secrets: this.secrets,
        prices: measuredPrices(o.prices ?? (await readStackPrices(this.store)) ?? {}),
        log: this.log,
        modelServer: new EngineModelServer(this.store, {
          serving: { ...server, publicUrl: o.publicUrl, token: inner.token, tokenEnv: WORKER_TOKEN_ENV },
          executionProvider: o.executionProvider,
        }),
        // The Episode function has its own environment: nothing can be handed to it per evaluation.
        fanoutFor: (): Fanout => {
          const site = cloudSite(o.cloud, o.publicUrl);
          return { dispatch: (requests, options) => site.fanout.dispatch(requests, options), close: () => site.close() };
        },
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

  /**
   * Claims and runs, one after another and oldest first, every entry queued now; resolves with what this
   * box claimed and handled (a run stopped before it started, or already over, is handled by marking it).
   */
  async pollOnce(lane: (kind: WorkKind) => boolean = () => true): Promise<RanWork[]> {
    await this.publishCertificate();
    await this.open();
    const listed = (await this.store.list(keys.workQueue())).flatMap((key) => {
      const work = parseQueuedWorkKey(key);
      return work && lane(work.kind) ? [{ key, ...work }] : [];
    });
    const entries = await Promise.all(
      listed.map(async (e) => {
        const queued = await this.readEntry(e.key);
        return { ...e, queuedAt: queued?.queuedAt ?? UNKNOWN_TIME, apiKey: queued?.apiKey, export: queued?.export };
      }),
    );
    entries.sort((a, b) => a.queuedAt.localeCompare(b.queuedAt) || a.key.localeCompare(b.key));
    if (entries.length) this.lastBusyAt = Date.now();
    const ran: RanWork[] = [];
    for (const entry of entries) {
      if (this.closing) break;
      const work = { kind: entry.kind, id: entry.id };
      let ranHere = false;
      try {
        if (!(await this.claim(work))) {
          // A run another box process claimed and died with stays `running` for ever unless someone says so.
          if (!(work.kind === 'run' && (await this.failIfStale(work.id)))) this.log.info(work, 'claimed already (a duplicate entry, or another box): not run here');
        } else {
          if (work.kind !== 'export') this.current = work;
          else this.exporting++;
          this.log.info(work, 'claimed: running');
          if (work.kind === 'run') await this.gated(() => this.runRun(work.id));
          else if (work.kind === 'evaluation') await this.gated(() => this.runEvaluation(work.id, entry.apiKey));
          else await this.runExport(work.id, entry.export);
          ran.push(work);
          ranHere = true;
          this.log.info(work, 'done');
        }
        // A run interrupted by this box (a new artifact, the service stopping) keeps its entry: the next box
        // start claims it again and resumes it. So does one resumed over the API while it was ending here.
        // One stopped by request, or over, is done with.
        const keep = work.kind === 'run' && (((this.handingOverTo || this.closing) && (await this.requeueInterrupted(work.id))) || (ranHere && (await this.resumedMeanwhile(work.id))));
        if (!keep) await this.store.delete(entry.key);
      } catch (err) {
        // A store error leaves the entry for the next poll; the claim (if written) keeps it from running twice.
        this.log.error({ ...work, error: (err as Error).message }, 'queued work failed');
      } finally {
        if (work.kind !== 'export') this.current = null;
        else this.exporting--;
        this.lastBusyAt = Date.now();
      }
    }
    return ran;
  }

  private published: Promise<unknown> | undefined;
  /** Once per box start: the certificate the Episode function pins, before any work can need it. */
  private publishCertificate(): Promise<unknown> {
    if (!this.o.tls) return Promise.resolve();
    this.published ??= publishCertificate(this.store, this.o.tls).then(
      (c) => this.log.info({ sha256: c.sha256 }, 'TLS certificate published'),
      (err: unknown) => {
        this.published = undefined;
        throw err;
      },
    );
    return this.published;
  }

  /** Polls until close(), or until a new artifact is deployed (then see `handedOver`). */
  start(): void {
    // Two lanes: runs and evaluations one at a time (one GPU, one inference port), and model exports,
    // which need neither, so an export asked for during a long run is made while it trains.
    this.loop ??= Promise.all([this.lane((kind) => kind !== 'export'), this.lane((kind) => kind === 'export')]).then(() => {
      if (this.handingOverTo) this.handOver(this.handingOverTo);
    });
    if (this.o.artifactSha256 && !this.updateWatch) {
      this.updateWatch = setInterval(() => void this.checkArtifact(), this.o.updatePollMs ?? this.o.pollMs ?? 5000);
    }
  }

  /** Reads the stack's artifact pointer; a new artifact starts the hand-over (once). */
  async checkArtifact(): Promise<void> {
    if (this.handingOverTo || this.closing || !this.o.artifactSha256) return;
    let pointer: ArtifactPointer | null;
    try {
      pointer = await readJson(this.store, keys.artifactPointer(), ArtifactPointer);
    } catch (err) {
      this.log.error({ error: (err as Error).message }, 'reading the artifact pointer failed; running on');
      return;
    }
    if (!pointer || pointer.sha256 === this.o.artifactSha256 || pointer.sha256 === this.o.skipArtifactSha256 || this.handingOverTo) return;
    this.handingOverTo = pointer.sha256;
    this.log.info({ running: this.o.artifactSha256, deployed: pointer.sha256, current: this.current }, 'a new artifact is deployed: handing over after the iteration in flight');
    this.closing = true;
    this.wake.abort();
    if (this.updateWatch) clearInterval(this.updateWatch);
    if (this.current?.kind === 'run') await this.runs?.stop(this.current.id);
  }

  /**
   * A run this box stopped (a hand-over, or close()) goes back to `requested`, its claim released: the next
   * box start claims it again and the loop resumes it from its log. Not one that was asked to stop
   * (stop.json), nor one that ended on its own meanwhile.
   */
  private async requeueInterrupted(run: string): Promise<boolean> {
    const status = await readJson(this.store, keys.runStatus(run), RunStatus);
    if (!status || status.state !== 'stopped' || status.stopReason !== 'requested' || (await this.store.get(keys.stopRequest(run))) !== null) return false;
    const now = new Date().toISOString();
    await writeJson(this.store, keys.runStatus(run), RunStatus.parse({ ...status, state: 'requested', finishedAt: null, stopReason: null, updatedAt: now }));
    await this.store.delete(keys.workClaim('run', run));
    this.log.info({ run, to: this.handingOverTo }, this.handingOverTo ? 'run handed over: back in the queue, resumed by the new artifact' : 'run interrupted by the service stopping: back in the queue, resumed at the next start');
    return true;
  }

  /**
   * A run that is `requested` again once this box is done with it was resumed (POST /runs/{id}/resume)
   * after its status said it ended and before its entry went: the entry is the resume's, so it stays, and
   * the claim goes, so that the next poll claims and resumes it.
   */
  private async resumedMeanwhile(run: string): Promise<boolean> {
    const status = await readJson(this.store, keys.runStatus(run), RunStatus);
    if (status?.state !== 'requested') return false;
    await this.store.delete(keys.workClaim('run', run));
    this.log.info({ run }, 'run resumed while it ended here: left in the queue');
    return true;
  }

  private async lane(kinds: (kind: WorkKind) => boolean): Promise<void> {
    while (!this.closing) {
      try {
        await this.pollOnce(kinds);
        if (kinds('run')) await this.stopIfIdle();
      } catch (err) {
        this.log.error({ error: (err as Error).message }, 'listing the queue failed; retrying');
      }
      await sleep(this.o.pollMs ?? 5000, undefined, { signal: this.wake.signal }).catch(() => {});
    }
  }

  /**
   * Stops the instance when it has been idle for `idleMinutes`: no work running, none queued when it last
   * looked, and none queued when it looks again right before the stop. Resolves whether it asked for the stop.
   */
  async stopIfIdle(now = Date.now()): Promise<boolean> {
    const busy = this.current !== null || this.exporting > 0;
    if (this.stopAsked || !idleStopDue({ idleMinutes: this.o.idleMinutes ?? 0, lastBusyAt: this.lastBusyAt, now, busy })) return false;
    if ((await this.store.list(keys.workQueue())).length > 0) {
      this.lastBusyAt = now;
      return false;
    }
    this.log.info({ idleMinutes: this.o.idleMinutes, idleSince: new Date(this.lastBusyAt).toISOString() }, 'idle: stopping this instance (the Api starts it when work is queued)');
    try {
      await this.o.stopSelf!();
      this.stopAsked = true;
      return true;
    } catch (err) {
      // Counted as busy now, so the next try comes after another idle period rather than every poll.
      this.lastBusyAt = now;
      this.log.error({ error: (err as Error).message }, 'the idle stop failed');
      return false;
    }
  }

  /** Stops polling; a run in flight stops after its current iteration and goes back to the queue, for the next box start to resume. */
  async close(): Promise<void> {
    this.closing = true;
    this.wake.abort();
    if (this.updateWatch) clearInterval(this.updateWatch);
    if (this.current?.kind === 'run') await this.runs?.stop(this.current.id);
    await this.loop;
    await this.runs?.settled();
    this.follower?.close();
    this.store.destroy();
    this.ownSecrets?.destroy();
  }

  private async readEntry(key: string): Promise<QueuedWork | null> {
    try {
      return await readJson(this.store, key, QueuedWork);
    } catch (err) {
      this.log.error({ key, error: (err as Error).message }, 'unreadable queue entry; ordered last');
      return null;
    }
  }

  /**
   * A run claimed by a box process that is gone is marked failed, visibly, with how to resume it (its
   * checkpoints and log are intact). Gone: on this host, a process that no longer exists; on another host
   * (a replaced instance), no sign of life — the claim, the status, the newest metrics row — for
   * `staleAfterMs`. A claimant that may still be running is left alone.
   */
  private async failIfStale(run: string): Promise<boolean> {
    const [claim, status] = await Promise.all([readJson(this.store, keys.workClaim('run', run), WorkClaim), readJson(this.store, keys.runStatus(run), RunStatus)]);
    if (!claim || !status || !['requested', 'running', 'stopping'].includes(status.state) || claim.claimedBy === this.who) return false;
    const [host, pid] = [claim.claimedBy.slice(0, claim.claimedBy.lastIndexOf(':')), Number(claim.claimedBy.slice(claim.claimedBy.lastIndexOf(':') + 1))];
    let gone: boolean;
    if (host === hostname()) {
      gone = !processAlive(pid);
    } else {
      const rows = (await this.store.list(`${keys.run(run)}metrics/`)).filter((k) => k.endsWith('.json')).sort();
      const newest = rows.length ? await readJson(this.store, rows[rows.length - 1]!, MetricsRow) : null;
      const lastSign = Math.max(Date.parse(claim.claimedAt), Date.parse(status.updatedAt), newest ? Date.parse(newest.finishedAt) : 0);
      gone = Date.now() - lastSign > (this.o.staleAfterMs ?? DEFAULT_STALE_AFTER_MS);
    }
    if (!gone) return false;
    const now = new Date().toISOString();
    const error = `interrupted: the trainer box process that ran it (${claim.claimedBy}, claimed ${claim.claimedAt}) is gone; its checkpoints and log are intact: resume it with \`esopt train --cloud --resume ${run}\``;
    await writeJson(this.store, keys.runStatus(run), RunStatus.parse({ ...status, state: 'failed', error, finishedAt: now, updatedAt: now }));
    this.log.warn({ run, claimedBy: claim.claimedBy }, 'stale run marked failed');
    return true;
  }

  private async claim(work: RanWork): Promise<boolean> {
    const key = keys.workClaim(work.kind, work.id);
    const mine: WorkClaim = { ...work, claimId: randomBytes(16).toString('hex'), claimedBy: this.who, claimedAt: new Date().toISOString() };
    if (!(await writeJson(this.store, key, mine, true))) return false;
    await sleep(this.o.claimSettleMs ?? 500);
    return (await readJson(this.store, key, WorkClaim))?.claimId === mine.claimId;
  }

  private async runRun(id: string): Promise<void> {
    // The replica boxes follow whichever run this box trains (trainer/cloud/box/replica-box.ts).
    const active: ActiveRun = { run: id, startedAt: new Date().toISOString() };
    await writeJson(this.store, keys.activeRun(), active);
    await this.runs!.start(id);
    // close() came while this run was being claimed: it too ends after its first iteration.
    if (this.closing) await this.runs!.stop(id);
    await this.runs!.settled();
  }

  private async runExport(id: string, request: ModelExportRequest | undefined): Promise<void> {
    if (!request) throw new Error(`queued export ${id} names no run, iteration and format`);
    const status = await runModelExport(this.store, request, this.o.exportInto ?? exportFromStore(this.store));
    this.log.info({ export: id, ...request, state: status.state, bytes: status.bytes, error: status.error }, 'model export');
  }

  private async runEvaluation(id: string, apiKeyRef: EvaluationKeyRef | undefined): Promise<void> {
    const status = await readJson(this.store, keys.evaluationStatus(id), EvaluationStatus);
    if (status?.state !== 'queued') {
      this.log.info({ evaluation: id, state: status?.state ?? 'missing' }, 'evaluation is not queued; not run');
      if (apiKeyRef) await this.secrets.delete(apiKeyRef.parameter);
      return;
    }
    // The runner deletes the key when the evaluation ends, however it ends.
    await runEvaluation(this.evaluations!, id, apiKeyRef ? { apiKeyRef } : {});
  }
}
