/**
 * The API app as the Api Lambda serves it: the S3 store of the stack, the token from the function's
 * environment, and launchers that queue the work in the store for the trainer box (queued-launchers.ts).
 * Endpoint keys of queued evaluations go to SSM (SecureString parameters under ESOPT_EVALUATION_KEYS).
 * functions/api.ts wraps it with hono/aws-lambda.
 */
import { pino, type Logger } from 'pino';
import { z } from 'zod';
import { pricesFromEnv } from '../cost-prices-env.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { SecretStore } from '../../shared/ports/secret-store.ts';
import { SecretName } from '../../shared/schemas/index.ts';
import { SsmSecretStore } from '../../shared/secrets/ssm.ts';
import { DEFAULT_AWS_REGION } from '../../shared/store/aws-region.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { s3SignedDownload } from '../../shared/store/s3-signed-download.ts';
import { openStore } from '../../shared/store/store-spec.ts';
import { Ec2Instance, InstanceId } from '../../shared/boxes/ec2-instance.ts';
import { DEFAULT_RATE_LIMIT } from './rate-limit.ts';
import { createApiApp } from './app.ts';
import { boxWaker } from './box-wake.ts';
import { storeQueueLaunchers } from './queued-launchers.ts';

export const CloudApiEnv = z.object({
  ESOPT_BUCKET: z.string().min(3),
  AWS_REGION: z.string().min(1).default(DEFAULT_AWS_REGION),
  ESOPT_TOKEN: z.string().min(16, 'ESOPT_TOKEN must be at least 16 characters'),
  /** The SSM path under which a queued evaluation's endpoint key is stored as `<path>/<evaluation id>`. */
  ESOPT_EVALUATION_KEYS: SecretName,
  /** JSON of CostPrices, the same variable the Episode function reads. */
  /** JSON of CostPrices, set by the stack (functions/cost-prices-env.ts). */
  ESOPT_COST_PRICES: z.string().min(1),
  /**
   * How long one events stream lasts before the client is asked to reconnect with Last-Event-ID: the
   * buffered Lambda handler answers only when the stream ends, and the function times out at 30 s.
   */
  ESOPT_EVENT_WINDOW_MS: z.coerce.number().int().min(100).max(900_000).default(20_000),
  /** The trainer box's instance, started when work is queued (it stops itself when idle); unset, nothing is started. */
  ESOPT_TRAINER_INSTANCE: InstanceId.optional(),
  /** The stack's cap on a run's spend (USD): a run without `budget.maxCostUsd` gets it, one above it is refused; unset, a run must name its own. */
  ESOPT_MAX_RUN_COST_USD: z.coerce.number().positive().finite().optional(),
  /** The same for an evaluation's `budget.maxCostUsd`. */
  ESOPT_MAX_EVALUATION_COST_USD: z.coerce.number().positive().finite().optional(),
  /** Requests a second per token, sustained, and at once (functions/http-api/rate-limit.ts), per instance of the function. */
  ESOPT_API_RATE_PER_SECOND: z.coerce.number().positive().finite().default(DEFAULT_RATE_LIMIT.perSecond),
  ESOPT_API_RATE_BURST: z.coerce.number().int().min(1).default(DEFAULT_RATE_LIMIT.burst),
});
export type CloudApiEnv = z.infer<typeof CloudApiEnv>;

export function createCloudApp(
  input: z.input<typeof CloudApiEnv>,
  givenStore?: ObjectStore,
  log: Logger = pino({ name: 'esopt-api' }),
  givenSecrets?: SecretStore,
  givenBox?: { start: Ec2Instance['start'] },
) {
  const env = CloudApiEnv.parse(input);
  const store = givenStore ?? openStore({ kind: 's3', bucket: env.ESOPT_BUCKET, region: env.AWS_REGION });
  // Archives are fetched from the bucket by a presigned URL where the store is S3 (the Api's responses are capped at 6 MB).
  const signedDownload = store instanceof S3ObjectStore ? s3SignedDownload(store) : undefined;
  const secrets = givenSecrets ?? new SsmSecretStore({ region: env.AWS_REGION });
  const box = givenBox ?? (env.ESOPT_TRAINER_INSTANCE ? new Ec2Instance({ instanceId: env.ESOPT_TRAINER_INSTANCE, region: env.AWS_REGION }) : undefined);
  const wake = box ? boxWaker(box, log) : undefined;
  return createApiApp({
    store,
    token: env.ESOPT_TOKEN,
    ...storeQueueLaunchers(store, { secrets, path: env.ESOPT_EVALUATION_KEYS }, wake),
    endpointKeys: { secrets, path: env.ESOPT_EVALUATION_KEYS },
    ...(signedDownload ? { signedDownload } : {}),
    deployed: true,
    // The trainer box that picks queued work up serves base models and checkpoints.
    servesOwnModels: true,
    prices: pricesFromEnv(env.ESOPT_COST_PRICES),
    // Nothing is queued without a spending limit: the request's, or the stack's cap (cost-caps.ts).
    costCaps: {
      ...(env.ESOPT_MAX_RUN_COST_USD !== undefined ? { runMaxCostUsd: env.ESOPT_MAX_RUN_COST_USD } : {}),
      ...(env.ESOPT_MAX_EVALUATION_COST_USD !== undefined ? { evaluationMaxCostUsd: env.ESOPT_MAX_EVALUATION_COST_USD } : {}),
    },
    log,
    // Lambda bills the open stream: poll less often than the local API.
    eventPollMs: 2000,
    eventWindowMs: env.ESOPT_EVENT_WINDOW_MS,
    rateLimit: { perSecond: env.ESOPT_API_RATE_PER_SECOND, burst: env.ESOPT_API_RATE_BURST },
  });
}
