/**
 * What the CLI reads to reach a deployed stack, pointed at a local cloud: the bucket, the Episode
 * function and both endpoints, with s3rver's fixed development key pair for the SDK's credential chain.
 */
import { EPISODE_FUNCTION, type LocalCloud } from '../../../trainer/dev/local-cloud/local-cloud.ts';

export const S3RVER_CREDENTIALS = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' };

export function localStackEnv(cloud: Pick<LocalCloud, 's3' | 'invoke'>): Record<string, string> {
  return {
    ...S3RVER_CREDENTIALS,
    ESOPT_BUCKET: cloud.s3.bucket,
    ESOPT_EPISODE_FUNCTION: EPISODE_FUNCTION,
    AWS_REGION: 'us-east-1',
    AWS_ENDPOINT_URL_S3: cloud.s3.endpoint,
    AWS_ENDPOINT_URL_LAMBDA: cloud.invoke.url,
  };
}
