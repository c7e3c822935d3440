/**
 * Presigned GETs of the S3 store's objects: a client downloads a large archive straight from the bucket
 * with the URL alone, so the bytes never pass through the Api function (whose responses are capped).
 * The presigner is loaded on first use, like the SDK itself.
 */
import type { SignedDownload } from '../ports/model-exports.ts';
import { assertStoreKey } from './store-key.ts';
import type { S3ObjectStore } from './s3.ts';

export function s3SignedDownload(store: S3ObjectStore): SignedDownload {
  return async (key, filename, expiresIn) => {
    const [{ GetObjectCommand }, { getSignedUrl }] = await Promise.all([import('@aws-sdk/client-s3'), import('@aws-sdk/s3-request-presigner')]);
    const command = new GetObjectCommand({
      Bucket: store.config.bucket,
      Key: assertStoreKey(key),
      ResponseContentDisposition: `attachment; filename="${filename.replace(/["\\\r\n]/g, '_')}"`,
    });
    return getSignedUrl(await store.sdkClient(), command, { expiresIn });
  };
}
