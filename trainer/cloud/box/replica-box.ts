/**
 * A deployed replica box's service (`esopt replica-box`): it follows whichever run the coordinator box is
 * training. The coordinator box names that run in `keys.activeRun()` when it starts one; this box reads
 * it, and while the run's status is `running` it is a trainer replica of it (replica.ts: restore θ,
 * announce its address and certificate, serve its members, apply each update, report θ hashes). It lets
 * the run go when the run ends or the coordinator moves on, and waits for the next one.
 *
 * One start of a run is followed once: a replica that failed (a θ mismatch, a store error) is not retried
 * until the coordinator starts the run again (a resume writes a new `startedAt`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { ActiveRun, RunStatus } from '../../../shared/schemas/index.ts';
import { readJson } from '../../../shared/store/json.ts';
import type { TlsIdentity } from '../../serving/tls-identity.ts';
import { startReplica, type ReplicaOptions, type RunningReplica } from '../../jobs/replica.ts';
import { randomBytes } from 'node:crypto';
import { startTokenGate } from '../../serving/token-gate.ts';
import type { TokenCheck } from '../../serving/token-follower.ts';
import { freeLoopbackPort } from '../../serving/free-port.ts';
import type { ExecutionProvider } from '../../../shared/execution-provider.ts';

export interface ReplicaBoxOptions {
  store: ObjectStore;
  /** This box's replica id, fixed per box (its announcement and reports are written under it). */
  id: string;
  /** Where the Episode function reaches this box (…/v1); https with `tls`. */
  publicUrl: string;
  host: string;
  port: number;
  token: string;
  tls?: TlsIdentity;
  /**
   * The stack's rotating token (token-follower.ts): the public port is then a gate that checks it
   * (token-gate.ts) in front of the replica's server on a loopback port with a token of this box's own,
   * so a rotation reaches this box as it reaches the trainer box. Without it the server checks `token`.
   */
  tokens?: TokenCheck;
  /** How often the active run and its status are read. */
  pollMs: number;
  /** The replica's own poll of the run's records. */
  followPollMs?: number;
  executionProvider?: ExecutionProvider;
  log: { info(fields: object, message: string): void; error(fields: object, message: string): void };
}

export class ReplicaBox {
  private closing = false;
  private loop: Promise<void> | null = null;
  private current: RunningReplica | null = null;
  private readonly wake = new AbortController();
  /** The starts (run + startedAt) followed already. */
  private readonly followed = new Set<string>();

  constructor(private readonly o: ReplicaBoxOptions) {
    if (o.publicUrl.startsWith('https:') !== Boolean(o.tls)) throw new Error(`the public URL ${o.publicUrl} and the server must agree: https with a TLS identity, http without`);
  }

  /** Follows runs until close(). */
  start(): void {
    this.loop ??= (async () => {
      while (!this.closing) {
        try {
          await this.pollOnce();
        } catch (err) {
          this.o.log.error({ error: (err as Error).message }, 'following the active run failed; polling again');
        }
        await this.pause();
      }
    })();
  }

  /** Follows the active run, if there is one to follow, until it ends here; resolves with its id, or null. */
  async pollOnce(): Promise<string | null> {
    const active = await readJson(this.o.store, keys.activeRun(), ActiveRun);
    if (!active || this.followed.has(`${active.run}@${active.startedAt}`) || !(await this.running(active.run))) return null;
    this.followed.add(`${active.run}@${active.startedAt}`);
    const { run } = active;
    const inner = this.o.tokens ? { port: await freeLoopbackPort(), token: randomBytes(24).toString('hex') } : null;
    const gate = inner ? await startTokenGate({ host: this.o.host, port: this.o.port, tls: this.o.tls, tokens: this.o.tokens!, upstream: inner }) : null;
    const options: ReplicaOptions = {
      store: this.o.store,
      run,
      id: this.o.id,
      token: inner?.token ?? this.o.token,
      server: inner ? { host: '127.0.0.1', port: inner.port } : { host: this.o.host, port: this.o.port, tls: this.o.tls },
      ...(inner && this.o.tls ? { publicTls: this.o.tls } : {}),
      publicUrl: this.o.publicUrl,
      pollMs: this.o.followPollMs,
      executionProvider: this.o.executionProvider,
      onProgress: (e) => this.o.log.info({ run, ...e }, `replica ${e.kind}`),
    };
    this.o.log.info({ run, replica: this.o.id }, 'following the coordinator box');
    let replica: RunningReplica;
    try {
      replica = this.current = await startReplica(options);
    } catch (err) {
      await gate?.close();
      throw err;
    }
    let ended = false;
    replica.done.then(
      (r) => this.o.log.info({ run, ...r }, 'run followed to its last update'),
      (err: unknown) => this.o.log.error({ run, error: (err as Error).message }, 'replica failed'),
    ).finally(() => (ended = true));
    try {
      while (!ended && !this.closing) {
        await this.pause();
        const now = await readJson(this.o.store, keys.activeRun(), ActiveRun).catch(() => active);
        if (now?.run !== run || now.startedAt !== active.startedAt || !(await this.running(run).catch(() => true))) {
          this.o.log.info({ run }, 'the coordinator stopped this run or moved on: replica released');
          break;
        }
      }
    } finally {
      this.current = null;
      await replica.stop();
      await gate?.close();
    }
    return run;
  }

  private async running(run: string): Promise<boolean> {
    return (await readJson(this.o.store, keys.runStatus(run), RunStatus))?.state === 'running';
  }

  private pause(): Promise<void> {
    return sleep(this.o.pollMs, undefined, { signal: this.wake.signal }).catch(() => {});
  }

  /** Stops following (the replica's server closes at once: its in-flight members fail over) and ends the loop. */
  async close(): Promise<void> {
    this.closing = true;
    this.wake.abort();
    await this.current?.stop();
    await this.loop;
  }
}
