/**
 * A deployed stack as the trainer sees it: the runs bucket (S3 adapter) and the Episode function
 * (Lambda adapter). What `sst deploy` prints, or what the trainer box's environment says, turned into
 * the ObjectStore + Fanout pair that the ES loop takes in place of the embedded fs store + local pool.
 */
import { z } from 'zod';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { LambdaFanout } from './lambda.ts';

export const CloudTarget = z
  .object({
    bucket: z.string().min(3).max(63),
    episodeFunction: z.string().min(1).max(170),
    region: z.string().min(1).default('us-east-1'),
    invocationType: z.enum(['Event', 'RequestResponse']).default('Event'),
    episodesPerInvocation: z.number().int().min(1).max(64).default(1),
  })
  .strict();
export type CloudTarget = z.infer<typeof CloudTarget>;

/** From ESOPT_BUCKET, ESOPT_EPISODE_FUNCTION, AWS_REGION (and optional ESOPT_EPISODES_PER_INVOCATION). */
export function cloudTargetFromEnv(env: Record<string, string | undefined>): CloudTarget {
  const r = CloudTarget.safeParse({
    bucket: env.ESOPT_BUCKET,
    episodeFunction: env.ESOPT_EPISODE_FUNCTION,
    region: env.AWS_REGION ?? env.ESOPT_AWS_REGION,
    episodesPerInvocation: env.ESOPT_EPISODES_PER_INVOCATION === undefined ? undefined : Number(env.ESOPT_EPISODES_PER_INVOCATION),
  });
  if (!r.success) throw new Error(`the cloud target is incomplete: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')} (set ESOPT_BUCKET and ESOPT_EPISODE_FUNCTION from \`sst deploy\`'s outputs)`);
  return r.data;
}

export function openCloudTarget(target: CloudTarget): { store: S3ObjectStore; fanout: LambdaFanout } {
  return {
    store: new S3ObjectStore({ bucket: target.bucket, region: target.region }),
    fanout: new LambdaFanout({
      functionName: target.episodeFunction,
      region: target.region,
      invocationType: target.invocationType,
      episodesPerInvocation: target.episodesPerInvocation,
    }),
  };
}
