/**
 * A deployed stack as the trainer sees it: the runs bucket (S3 adapter) and the Episode function
 * (Lambda adapter). What `sst deploy` prints, or what the trainer box's environment says, turned into
 * the ObjectStore + Fanout pair that the run wiring (trainer/assembly/run.ts) takes in place of the
 * embedded fs store + local pool: `esopt train --cloud`.
 */
import { z } from 'zod';
import { DEFAULT_AWS_REGION } from '../../shared/store/aws-region.ts';
import type { S3ObjectStore } from '../../shared/store/s3.ts';
import type { Site } from './site.ts';
import type { LambdaFanout } from '../fanout/lambda.ts';
import { awaitingRecords, lambdaFanout } from './fanouts.ts';
import { bucketStore } from './stores.ts';

export const CloudStack = z
  .object({
    bucket: z.string().min(3).max(63),
    episodeFunction: z.string().min(1).max(170),
    region: z.string().min(1).default(DEFAULT_AWS_REGION),
    invocationType: z.enum(['Event', 'RequestResponse']).default('Event'),
    episodesPerInvocation: z.number().int().min(1).max(64).default(1),
    /** An S3-compatible server instead of AWS S3 (s3rver on loopback in the tests). */
    s3Endpoint: z.url().optional(),
    /** A Lambda-Invoke-compatible endpoint instead of AWS Lambda (trainer/dev/local-cloud/invoke-endpoint.ts). */
    lambdaEndpoint: z.url().optional(),
    /** Default: path-style exactly when `s3Endpoint` is set, as S3-compatible servers need. */
    forcePathStyle: z.boolean().optional(),
  })
  .strict();
export type CloudStack = z.infer<typeof CloudStack>;

/** A variable that is unset or empty is "not set": shells and CI often export empty strings. */
const notSet = (iss: { input?: unknown }) => (iss.input === undefined ? 'is not set' : undefined);

/** The trainer box's environment, by variable name, so an error names the variable to set. */
const CloudEnv = z.object({
  ESOPT_BUCKET: z.string({ error: notSet }).min(3).max(63),
  ESOPT_EPISODE_FUNCTION: z.string({ error: notSet }).min(1).max(170),
  AWS_REGION: z.string().optional(),
  ESOPT_AWS_REGION: z.string().optional(),
  ESOPT_INVOCATION_TYPE: z.enum(['Event', 'RequestResponse']).optional(),
  ESOPT_EPISODES_PER_INVOCATION: z.coerce.number().int().min(1).max(64).optional(),
  // The AWS SDKs' own names for endpoint overrides; the service-specific one wins.
  AWS_ENDPOINT_URL: z.url().optional(),
  AWS_ENDPOINT_URL_S3: z.url().optional(),
  AWS_ENDPOINT_URL_LAMBDA: z.url().optional(),
  ESOPT_S3_FORCE_PATH_STYLE: z.enum(['true', 'false']).optional(),
});

/**
 * From ESOPT_BUCKET, ESOPT_EPISODE_FUNCTION (`sst deploy`'s outputs `bucket`, `episodeFunction`),
 * AWS_REGION (or ESOPT_AWS_REGION), and optionally ESOPT_INVOCATION_TYPE, ESOPT_EPISODES_PER_INVOCATION,
 * AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL_LAMBDA / AWS_ENDPOINT_URL and ESOPT_S3_FORCE_PATH_STYLE.
 */
export function cloudStackFromEnv(env: Record<string, string | undefined>): CloudStack {
  const present = Object.fromEntries(Object.keys(CloudEnv.shape).flatMap((name) => (env[name] ? [[name, env[name]]] : [])));
  const r = CloudEnv.safeParse(present);
  if (!r.success) {
    const problems = r.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ');
    throw new Error(`the cloud stack is incomplete: ${problems} (ESOPT_BUCKET and ESOPT_EPISODE_FUNCTION are \`sst deploy\`'s outputs bucket and episodeFunction)`);
  }
  const e = r.data;
  return CloudStack.parse({
    bucket: e.ESOPT_BUCKET,
    episodeFunction: e.ESOPT_EPISODE_FUNCTION,
    region: e.AWS_REGION ?? e.ESOPT_AWS_REGION,
    invocationType: e.ESOPT_INVOCATION_TYPE,
    episodesPerInvocation: e.ESOPT_EPISODES_PER_INVOCATION,
    s3Endpoint: e.AWS_ENDPOINT_URL_S3 ?? e.AWS_ENDPOINT_URL,
    lambdaEndpoint: e.AWS_ENDPOINT_URL_LAMBDA ?? e.AWS_ENDPOINT_URL,
    forcePathStyle: e.ESOPT_S3_FORCE_PATH_STYLE === undefined ? undefined : e.ESOPT_S3_FORCE_PATH_STYLE === 'true',
  });
}

/** Only the bucket's variables: what a command that reads and writes the bucket, and invokes nothing, needs. */
const BucketEnv = CloudEnv.pick({ ESOPT_BUCKET: true, AWS_REGION: true, ESOPT_AWS_REGION: true, AWS_ENDPOINT_URL: true, AWS_ENDPOINT_URL_S3: true, ESOPT_S3_FORCE_PATH_STYLE: true });

/** The stack's bucket from ESOPT_BUCKET, AWS_REGION (or ESOPT_AWS_REGION) and the S3 endpoint overrides alone. */
export function bucketStoreFromEnv(env: Record<string, string | undefined>): { store: S3ObjectStore; bucket: string } {
  const present = Object.fromEntries(Object.keys(BucketEnv.shape).flatMap((name) => (env[name] ? [[name, env[name]]] : [])));
  const r = BucketEnv.safeParse(present);
  if (!r.success) throw new Error(`the stack's bucket is not named: ${r.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')} (ESOPT_BUCKET is \`sst deploy\`'s output bucket)`);
  const e = r.data;
  const endpoint = e.AWS_ENDPOINT_URL_S3 ?? e.AWS_ENDPOINT_URL;
  const forcePathStyle = e.ESOPT_S3_FORCE_PATH_STYLE === undefined ? endpoint !== undefined : e.ESOPT_S3_FORCE_PATH_STYLE === 'true';
  return { store: bucketStore({ bucket: e.ESOPT_BUCKET, region: e.AWS_REGION ?? e.ESOPT_AWS_REGION ?? DEFAULT_AWS_REGION, endpoint, forcePathStyle }), bucket: e.ESOPT_BUCKET };
}

/** The stack's bucket; credentials come from the SDK's default provider chain (instance role, AWS_ACCESS_KEY_ID, profiles). */
export function openCloudStore(stack: CloudStack): S3ObjectStore {
  return bucketStore({ bucket: stack.bucket, region: stack.region, endpoint: stack.s3Endpoint, forcePathStyle: stack.forcePathStyle ?? stack.s3Endpoint !== undefined });
}

/** Credentials come from the SDK's default provider chain (instance role, AWS_ACCESS_KEY_ID, profiles). */
export function openCloudStack(stack: CloudStack): { store: S3ObjectStore; fanout: LambdaFanout } {
  return {
    store: openCloudStore(stack),
    fanout: lambdaFanout({
      functionName: stack.episodeFunction,
      region: stack.region,
      endpoint: stack.lambdaEndpoint,
      invocationType: stack.invocationType,
      episodesPerInvocation: stack.episodesPerInvocation,
    }),
  };
}

/**
 * The stack as a run stack. `publicUrl` is the inference server's address as the Episode function
 * reaches it, with or without the `/v1` the stack's `trainerUrl` output ends in; the function holds the
 * bearer token in ESOPT_TRAINER_TOKEN.
 */
export function cloudSite(stack: CloudStack, publicUrl: string): Site {
  const { store, fanout } = openCloudStack(stack);
  return {
    store,
    // The loop takes a settled dispatch to mean every record is in; an Event invoke settles at the queue.
    fanout: stack.invocationType === 'Event' ? awaitingRecords(fanout, store) : fanout,
    locate: (key) => `s3://${stack.bucket}/${key}`,
    policyEndpoint: { baseUrl: `${publicUrl.replace(/\/+$/, '').replace(/\/v1$/, '')}/v1`, tokenEnv: 'ESOPT_TRAINER_TOKEN' },
    async close() {
      await fanout.close();
      store.destroy();
    },
  };
}
