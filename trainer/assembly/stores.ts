/**
 * Object stores for every entry point: a directory on this machine, or an S3 bucket. Nothing outside
 * shared/store/, the Lambda handlers and assembly/ constructs a store (docs/architecture.json, `builders`);
 * a worker process opens the StoreSpec it is handed (shared/store/store-spec.ts).
 */
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { S3ObjectStore, type S3StoreConfigInput } from '../../shared/store/s3.ts';

/** The store under a directory (the embedded default: `--store DIR`, `.esopt/` otherwise). */
export function storeAt(root: string): ObjectStore {
  return new FsObjectStore(root);
}

/** A bucket (the stack's, or an S3-compatible server's); `destroy()` closes its connections. */
export function bucketStore(config: S3StoreConfigInput): S3ObjectStore {
  return new S3ObjectStore(config);
}
