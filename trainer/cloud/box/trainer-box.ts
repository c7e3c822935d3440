/**
 * The trainer box service: the Api function only writes (a run's config, an evaluation's request, and a
 * QueuedWork entry under `queue/`), and this service polls that prefix and runs what it claims here,
 * through the stack's S3 bucket and Episode function (the root's box wiring, trainer/assembly/wirings.ts).
 * It puts together the queue and its claims (work-queue.ts) and what each kind of work does (box-jobs.ts),
 * and holds what the box does between jobs: its two lanes, the hand-over to a new artifact, the idle stop.
 *
 * Invariant: one run or evaluation at a time, oldest first: the box has one GPU and one public inference
 * port. Model exports, which need neither, have a lane of their own, so an export asked for during a long
 * run is made while it trains. A run this box interrupts (a hand-over, the service stopping) keeps its
 * queue entry, to be resumed at the next box start; nothing is claimed once the box is closing.
 *
 * Idle stop: with `idleMinutes` > 0, a box with no work running and none queued for that long calls
 * `stopSelf` (EC2 StopInstances on its own instance), once the queue, listed again, is still empty; the
 * Api function starts the instance when it queues work (functions/http-api/box-wake.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { pino, type Logger } from 'pino';
import { keys } from '../../../shared/keys.ts';
import type { SecretStore } from '../../../shared/ports/secret-store.ts';
import { SsmSecretStore } from '../../../shared/secrets/ssm.ts';
import { ArtifactPointer, type WorkKind } from '../../../shared/schemas/index.ts';
import { readJson } from '../../../shared/store/json.ts';
import { CLAIM_HEARTBEAT_MS } from '../../../shared/stale-claim.ts';
import type { CloudStack } from '../../assembly/cloud-stack.ts';
import { boxWiring, type BoxWiring } from '../../assembly/wirings.ts';
import { BoxJobs, type BoxJobSettings } from './box-jobs.ts';
import { idleStopDue } from './idle-stop.ts';
import { WorkQueue, type RanWork, type WorkQueueOptions } from './work-queue.ts';

export { DEFAULT_STALE_AFTER_MS, type RanWork } from './work-queue.ts';

/**
 * The box's settings, with those of its jobs (the public port, the token, the polls of a run; box-jobs.ts)
 * and of its claims (work-queue.ts).
 */
export interface TrainerBoxOptions extends BoxJobSettings, Pick<WorkQueueOptions, 'claimSettleMs' | 'staleAfterMs'> {
  cloud: CloudStack;
  /** Stop the instance after this many minutes with no work running or queued (0 or unset: never). */
  idleMinutes?: number;
  /** What an idle stop does (EC2 StopInstances on this instance); required when idleMinutes > 0. */
  stopSelf?: () => Promise<void>;
  /** How often the queue is listed while idle. */
  pollMs?: number;
  /** How often a claim's heartbeat is rewritten while its work runs (default CLAIM_HEARTBEAT_MS). */
  heartbeatMs?: number;
  log?: Logger;
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

export class TrainerBox {
  readonly store: BoxWiring['store'];
  private readonly log: Logger;
  private readonly queue: WorkQueue;
  private readonly jobs: BoxJobs;
  /** When work last ran or was seen queued; the idle stop counts from here. */
  private lastBusyAt = Date.now();
  /** The exports this process is making now, by queue id. */
  private readonly exportsRunning = new Set<string>();
  private stopAsked = false;
  private readonly secrets: SecretStore;
  /** The SSM client this box opened itself (none when the options gave a store), closed with it. */
  private readonly ownSecrets: SsmSecretStore | null;
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
    const wiring = boxWiring(o.cloud, o.publicUrl);
    this.store = wiring.store;
    this.ownSecrets = o.secrets ? null : new SsmSecretStore({ region: o.cloud.region });
    this.secrets = o.secrets ?? this.ownSecrets!;
    this.log = o.log ?? pino({ name: 'esopt-trainer-box' });
    if (o.publicUrl.startsWith('https:') !== Boolean(o.tls)) throw new Error(`the public URL ${o.publicUrl} and the server must agree: https with a TLS identity, http without`);
    if ((o.idleMinutes ?? 0) > 0 && !o.stopSelf) throw new Error('idleMinutes > 0 needs stopSelf (what stops this instance)');
    this.queue = new WorkQueue({ store: this.store, log: this.log, claimSettleMs: o.claimSettleMs, staleAfterMs: o.staleAfterMs });
    this.jobs = new BoxJobs({ ...o, wiring, secrets: this.secrets, log: this.log });
  }

  /** The public port while a job serves on it, else null. */
  get port(): number | null {
    return this.jobs.port;
  }

  /**
   * Claims and runs, one after another and oldest first, every entry queued now; resolves with what this
   * box claimed and handled (a run stopped before it started, or already over, is handled by marking it).
   */
  async pollOnce(lane: (kind: WorkKind) => boolean = () => true): Promise<RanWork[]> {
    await this.jobs.open();
    const entries = await this.queue.list(lane);
    if (entries.length) this.lastBusyAt = Date.now();
    const ran: RanWork[] = [];
    for (const entry of entries) {
      if (this.closing) break;
      const work = { kind: entry.kind, id: entry.id };
      try {
        // Work over already (a re-delivered entry, an export made meanwhile) is done with, unclaimed.
        if (await this.queue.ended(entry)) {
          // An evaluation ended elsewhere (failed or cancelled before a box claimed it) leaves its key here to delete.
          if (entry.kind === 'evaluation') await this.jobs.deleteKey(entry.apiKey);
          await this.queue.remove(entry);
          continue;
        }
        let claim = await this.queue.claim(work);
        // Claimed already: by a box that is gone (the one stale-claim rule), then it is taken over and
        // claimed here; by one that may be alive, then its entry stays for the next poll to look again.
        if (!claim && (await this.queue.takeOverStale(entry))) claim = await this.queue.claim(work);
        if (!claim) {
          this.log.info(work, 'claimed by a box that may be running it: left queued, looked at again next poll');
          continue;
        }
        if (work.kind !== 'export') this.current = work;
        else this.exportsRunning.add(work.id);
        this.log.info(work, 'claimed: running');
        const beat = setInterval(() => void this.queue.heartbeat(claim).catch((err: unknown) => this.log.error({ ...work, error: (err as Error).message }, 'claim heartbeat failed')), this.o.heartbeatMs ?? CLAIM_HEARTBEAT_MS);
        try {
          if (work.kind === 'run') await this.jobs.run(work.id, () => this.closing);
          else if (work.kind === 'evaluation') await this.jobs.evaluation(work.id, entry.apiKey);
          else await this.jobs.export(work.id, entry.export);
        } finally {
          clearInterval(beat);
          this.queue.finished(claim);
          if (work.kind !== 'export') this.current = null;
          else this.exportsRunning.delete(work.id);
        }
        ran.push(work);
        this.log.info(work, 'done');
        // A run interrupted by this box (a new artifact, the service stopping) keeps its entry: the next box
        // start claims it again and resumes it. So does one resumed over the API while it was ending here.
        // Anything else has ended here: its entry goes.
        const keep =
          work.kind === 'run' &&
          (((this.handingOverTo || this.closing) && (await this.queue.requeueInterrupted(work.id, this.handingOverTo))) || (await this.queue.resumedMeanwhile(work.id)));
        if (!keep) await this.queue.remove(entry);
      } catch (err) {
        // A store error leaves the entry for the next poll; the claim, if written, is this process's, and
        // once nothing runs it here the stale-claim rule lets the next poll take it over.
        this.log.error({ ...work, error: (err as Error).message }, 'queued work failed');
      } finally {
        this.lastBusyAt = Date.now();
      }
    }
    return ran;
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
    if (this.current?.kind === 'run') await this.jobs.stopRun(this.current.id);
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
    const busy = this.current !== null || this.exportsRunning.size > 0;
    if (this.stopAsked || !idleStopDue({ idleMinutes: this.o.idleMinutes ?? 0, lastBusyAt: this.lastBusyAt, now, busy })) return false;
    if (await this.queue.anyQueued()) {
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
    if (this.current?.kind === 'run') await this.jobs.stopRun(this.current.id);
    await this.loop;
    await this.jobs.close();
    this.store.destroy();
    this.ownSecrets?.destroy();
  }
}
