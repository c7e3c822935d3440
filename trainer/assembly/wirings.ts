/**
 * The composition root: which parts a run is built from in each of the wirings.
 *
 *   embedded  `esopt train [--store DIR]`, `start`, the local API: a directory + the local worker pool
 *   cloud     `esopt train --cloud`: the stack's S3 bucket + the Episode Lambda, which reaches this
 *             machine's inference server at a public URL (https: TLS, its certificate pinned)
 *   box       `esopt trainer-box`: the stack's queue polled (cloud/box/trainer-box.ts), each run and
 *             evaluation run here like cloud (`boxWiring`: the box's own TLS is its token gate's)
 *
 * Every wiring ends in the same run (assembly/run.ts: engine, inference server, the ES loop).
 */
import type { Fanout } from '../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { S3ObjectStore } from '../../shared/store/s3.ts';
import type { RunConfig } from '../../shared/schemas/index.ts';
import { cloudSite, openCloudStore, type CloudStack } from './cloud-stack.ts';
import { localSite } from './local-site.ts';
import type { Site } from './site.ts';
import { storeAt } from './stores.ts';
import { createTlsIdentity, publishCertificate, type TlsIdentity } from '../serving/tls-identity.ts';

/** A run's store and site before its config is known (a resume reads the config from the store). */
export interface RunWiring {
  store: ObjectStore;
  /** Where the records are, for people: the directory or the bucket. */
  where: string;
  /** The run's site and how its inference server listens (tls: over HTTPS with that identity). */
  open(config: RunConfig): Promise<{ site: Site; tls?: TlsIdentity }>;
  /** Release what the wiring holds when the run never starts. */
  abandon(): Promise<void>;
}

/** An https public URL means TLS: a key and certificate made now (never stored) for its host name. */
export async function tlsFor(publicUrl: string): Promise<TlsIdentity | undefined> {
  return publicUrl.startsWith('https:') ? createTlsIdentity([new URL(publicUrl).hostname.replace(/^\[|\]$/g, '')]) : undefined;
}

/** Embedded: the store under `storeRoot`; the local pool, sized by the run's config, gets the server's token. */
export function embeddedWiring(storeRoot: string, token: string | undefined): RunWiring {
  return { store: storeAt(storeRoot), where: storeRoot, open: async (config) => ({ site: localSite(storeRoot, config, token) }), abandon: async () => {} };
}

/**
 * Cloud: the stack's bucket and Episode function; the function reaches the server at `publicUrl` with the
 * bearer token it holds. Over https the certificate is published in the bucket before the run, for the pin:
 * `identity`'s when the caller made the server's already (its replicas pin it too), else one made now.
 */
export function cloudWiring(cloud: CloudStack, publicUrl: string, identity?: TlsIdentity): RunWiring {
  const site = cloudSite(cloud, publicUrl);
  return {
    store: site.store,
    where: `s3://${cloud.bucket}`,
    async open() {
      const tls = identity ?? (await tlsFor(publicUrl));
      if (tls) await publishCertificate(site.store, tls);
      return { site, tls };
    },
    abandon: () => site.close(),
  };
}

/** What the trainer box (cloud/box/trainer-box.ts) runs its queued work over, all of it the stack's. */
export interface BoxWiring {
  /** The stack's bucket, where the queue, the claims and every run's and evaluation's records are. */
  store: S3ObjectStore;
  /** A fresh cloud site for each run the box trains; the run's inference server is reached at `publicUrl`. */
  runSite(): Site;
  /**
   * An evaluation's fan-out: the Episode function, which has its own environment, so nothing can be handed
   * to it per evaluation; closing it closes the site it came from.
   */
  evaluationFanout(): Fanout;
}

/** Box: the stack's bucket, and the cloud site (bucket + Episode function) for each run and each evaluation. */
export function boxWiring(cloud: CloudStack, publicUrl: string): BoxWiring {
  return {
    store: openCloudStore(cloud),
    runSite: () => cloudSite(cloud, publicUrl),
    evaluationFanout: () => {
      const site = cloudSite(cloud, publicUrl);
      return { dispatch: (requests, options) => site.fanout.dispatch(requests, options), close: () => site.close() };
    },
  };
}
