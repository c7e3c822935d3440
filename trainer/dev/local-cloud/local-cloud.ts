/**
 * The cloud on one machine: s3rver as the bucket, the dev invoke endpoint as Lambda and the dev SSM
 * endpoint as Parameter Store, the invoke endpoint running the real Episode handler against the real S3
 * and SSM adapters. What `esopt dev cloud` and
 * `esopt bench fanout` drive through the S3 and Lambda adapters, exactly as they would drive AWS.
 */
import { EMBEDDED_OUTBOUND, outboundPolicyFromEnv } from '../../../environments/outbound/address-policy.ts';
import { createEpisodeHandler, EpisodeFunctionEnv, type EpisodeLog } from '../../../functions/episode.ts';
import { trainerLinkFromEnv } from '../../../functions/trainer-certificate.ts';
import type { S3StoreConfig } from '../../../shared/store/s3.ts';
import { bucketStore } from '../../assembly/stores.ts';
import type { SecretStore } from '../../../shared/ports/secret-store.ts';
import { SsmSecretStore } from '../../../shared/secrets/ssm.ts';
import type { CostPrices } from '../../../shared/cost.ts';
import { pricesFromEnv } from '../../../functions/cost-prices-env.ts';
import { startInvokeEndpoint, type InvokeEndpoint } from './invoke-endpoint.ts';
import type { InvokeFaultsInput } from './invoke-faults.ts';
import { startLocalS3, type LocalS3 } from './s3-server.ts';
import { startSsmEndpoint, type SsmEndpoint } from './ssm-endpoint.ts';

export const EPISODE_FUNCTION = 'Episode';
/** The dev endpoints check no signature; the SDK still signs, so it needs some pair. */
export const DEV_CREDENTIALS = { accessKeyId: 'ESOPTDEV', secretAccessKey: 'ESOPTDEV' };

/** What the handler reported, summed over every delivery (duplicates included). */
export interface HandlerTally {
  written: number;
  /** Deliveries whose record was already there: absorbed by the handler's check or create-only put. */
  duplicates: number;
  closed: number;
  rejectedEvents: number;
}

export interface LocalCloud {
  s3: LocalS3;
  store: ReturnType<typeof bucketStore>;
  /** Parameter Store: where queued evaluations' keys are (read by the Episode handler through the SSM adapter). */
  ssm: SsmEndpoint;
  /** The SSM adapter on `ssm`, as the Api function and the trainer box use it. */
  secrets: SsmSecretStore;
  invoke: InvokeEndpoint;
  tally: HandlerTally;
  close(): Promise<void>;
}

export interface EpisodeEndpointOptions {
  faults?: InvokeFaultsInput;
  env?: Record<string, string | undefined>;
  memoryMb?: number;
  /** What an episode costs; unset, ESOPT_COST_PRICES in `env`, as on Lambda. */
  prices?: CostPrices;
  log?: EpisodeLog;
  /** Where the handler reads queued evaluations' keys. */
  secrets?: SecretStore;
}

/** The dev invoke endpoint running the real Episode handler, which writes through the S3 adapter to `storeConfig`'s bucket. */
export async function startEpisodeEndpoint(storeConfig: S3StoreConfig, options: EpisodeEndpointOptions = {}): Promise<{ store: ReturnType<typeof bucketStore>; invoke: InvokeEndpoint; tally: HandlerTally }> {
  // Many episodes write at once: enough sockets that writes do not queue inside the SDK.
  const store = bucketStore({ ...storeConfig, maxSockets: 512 });
  const env = options.env ?? process.env;
  // As on Lambda (episode.ts `handler`): the token only to the trainer boxes, each https one pinned.
  const link = trainerLinkFromEnv(store, EpisodeFunctionEnv.pick({ ESOPT_TRAINER_URL: true, ESOPT_REPLICA_URLS: true }).parse(env));
  const handle = createEpisodeHandler({
    store,
    env,
    tokenOrigins: link.tokenOrigins,
    trainerPins: link.pins,
    secrets: options.secrets,
    memoryMb: options.memoryMb ?? 1024,
    billedPerInvocation: true,
    prices: options.prices ?? pricesFromEnv(env.ESOPT_COST_PRICES),
    // As on Lambda, but this stand-in runs on one machine: endpoints on it are allowed unless ESOPT_ENDPOINT_NETWORKS says otherwise.
    environmentContext: { outbound: outboundPolicyFromEnv(env, EMBEDDED_OUTBOUND), allowCommands: false },
    log: options.log ?? { info() {}, error() {} },
  });
  const tally: HandlerTally = { written: 0, duplicates: 0, closed: 0, rejectedEvents: 0 };
  try {
    const invoke = await startInvokeEndpoint(
      {
        [EPISODE_FUNCTION]: async (event) => {
          const response = await handle(event);
          if (!response.ok) tally.rejectedEvents++;
          else
            for (const o of response.outcomes) {
              if (o.written) tally.written++;
              if (o.duplicate) tally.duplicates++;
              if (o.closed) tally.closed++;
            }
          return response;
        },
      },
      options.faults,
    );
    return { store, invoke, tally };
  } catch (err) {
    store.destroy();
    throw err;
  }
}

/** `ssmClock`: the SSM endpoint's idea of now, so a test can move a parameter past its expiry. */
export async function startLocalCloud(options: Omit<EpisodeEndpointOptions, 'secrets'> & { ssmClock?: () => number } = {}): Promise<LocalCloud> {
  const s3 = await startLocalS3('esopt-dev-cloud');
  const ssm = await startSsmEndpoint(options.ssmClock);
  const secrets = new SsmSecretStore({ endpoint: ssm.url, region: s3.storeConfig.region, credentials: DEV_CREDENTIALS });
  try {
    const { store, invoke, tally } = await startEpisodeEndpoint(s3.storeConfig, { ...options, secrets });
    return {
      s3,
      store,
      ssm,
      secrets,
      invoke,
      tally,
      async close() {
        await invoke.close();
        store.destroy();
        secrets.destroy();
        await ssm.close();
        await s3.close();
      },
    };
  } catch (err) {
    secrets.destroy();
    await ssm.close();
    await s3.close();
    throw err;
  }
}
