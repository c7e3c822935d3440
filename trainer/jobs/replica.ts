/**
 * A trainer replica: a second holder of θ that serves the members routed to it and applies every update
 * from the store's records (seeds and normalised rewards), never from weights. It restores θ like the
 * trainer does (checkpoint, then log), announces its address, and then, per iteration k: serves k's
 * members once k's manifest names its θ, applies k's update once the trainer has recorded it, and reports
 * its θ hash before k+1 (create-only), which the coordinator checks before routing k+1 to it.
 */
import { keys } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { IterationManifest, ReplicaAnnouncement, ReplicaReport, RunConfig, UpdateRecord } from '../../shared/schemas/index.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { serveModel, type ServedEngine } from '../assembly/run.ts';
import { restoreFromLog } from '../training/loop/index.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';
import { applyLogEntry, logEntryFor } from '../training/loop/index.ts';
import type { TlsIdentity } from '../serving/tls-identity.ts';
import type { ExecutionProvider } from '../../shared/execution-provider.ts';

export interface ReplicaOptions {
  store: ObjectStore;
  run: string;
  id: string;
  /** Bearer token of this replica's server (the same as the coordinator's: workers send one token). */
  token?: string;
  /** `tls`: serve HTTPS with this identity, its certificate announced with the address for the Episode function to pin. */
  server?: { host?: string; port?: number; tls?: TlsIdentity };
  /** The identity of the public port when a gate serves it in front of this server (replica-box.ts): announced instead of the server's. */
  publicTls?: TlsIdentity;
  /** The address workers reach this replica at (…/v1); default its own loopback URL. */
  publicUrl?: string;
  pollMs?: number;
  executionProvider?: ExecutionProvider;
  onProgress?: (event: { kind: 'restored' | 'serving' | 'updated'; iteration: number; thetaHash: string }) => void;
}

export interface RunningReplica {
  id: string;
  baseUrl: string;
  served: ServedEngine;
  /** Resolves once the run's last update is applied and reported (or after stop()); rejects on an error. */
  done: Promise<{ iterations: number; thetaHash: string }>;
  /** Stops following the run and closes the server at once, mid-iteration or not. */
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startReplica(o: ReplicaOptions): Promise<RunningReplica> {
  const pollMs = o.pollMs ?? 50;
  const { store, run } = o;
  let stopped = false;
  // A replica may start before the trainer has stored the run's config.
  let config: RunConfig | null = null;
  while (!(config = await readJson(store, keys.config(run), RunConfig))) {
    await sleep(pollMs);
  }
  const cfg = config;
  const served = await serveModel(cfg, { token: o.token, server: o.server, executionProvider: o.executionProvider, models: store });
  const { engine, server } = served;
  const baseUrl = o.publicUrl ?? `${server.url}/v1`;
  const segments = engine.segments();

  const report = async (k: number): Promise<void> => {
    const thetaHash = hashTheta(segments);
    const body: ReplicaReport = { id: o.id, iteration: k, thetaHash, reportedAt: new Date().toISOString() };
    // Create-only: a restarted replica with the same id never rewrites what it said before.
    await writeJson(store, keys.replicaReport(run, k, o.id), body, true);
  };

  const follow = async (): Promise<{ iterations: number; thetaHash: string }> => {
    let { next } = await restoreFromLog(store, run, engine, cfg.rank);
    o.onProgress?.({ kind: 'restored', iteration: next, thetaHash: hashTheta(segments) });
    const tls = o.publicTls ?? o.server?.tls;
    // The public certificate only: the key never leaves this process.
    const announcement: ReplicaAnnouncement = { id: o.id, baseUrl, ...(tls ? { tls: { certificate: tls.cert, sha256: tls.sha256 } } : {}), startedAt: new Date().toISOString() };
    await writeJson(store, keys.replica(run, o.id), announcement);
    await report(next);
    let live = -1;
    while (!stopped && next < cfg.iterations) {
      const update = await readJson(store, keys.update(run, next), UpdateRecord);
      const manifest = live === next && !update ? null : await readJson(store, keys.manifest(run, next), IterationManifest);
      if (update && manifest) {
        server.service.setPopulation(null);
        await applyLogEntry(engine, logEntryFor(cfg, next, manifest.members, update.normalizedRewards, update.thetaHashAfter), cfg.rank);
        next++;
        if (stopped) break;
        await report(next);
        o.onProgress?.({ kind: 'updated', iteration: next, thetaHash: hashTheta(segments) });
        continue;
      }
      if (manifest && live !== next && manifest.thetaHash === hashTheta(segments)) {
        server.service.setPopulation({ runSeed: manifest.runSeed, iteration: next, sigma: manifest.sigma, rank: manifest.rank, ...(manifest.targets ? { targets: manifest.targets } : {}), ...(manifest.noise ? { noise: manifest.noise } : {}), members: manifest.members });
        live = next;
        o.onProgress?.({ kind: 'serving', iteration: next, thetaHash: manifest.thetaHash });
      }
      await sleep(pollMs);
    }
    server.service.setPopulation(null);
    return { iterations: next, thetaHash: hashTheta(segments) };
  };

  const done = follow();
  // Keep a failure observable through `done` without an unhandled rejection before anyone awaits it.
  done.catch(() => {});
  return {
    id: o.id,
    baseUrl,
    served,
    done,
    async stop() {
      stopped = true;
      await served.close();
      await done.catch(() => {});
    },
  };
}
