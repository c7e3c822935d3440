/** The object store port: S3 in the cloud, a directory on a laptop. Keys follow `shared/keys.ts`. */
export interface PutOptions {
  /** Create-only: if the key exists, nothing is written and `put` resolves to `false`. */
  ifAbsent?: boolean;
  contentType?: string;
}

export interface ObjectStore {
  /** Resolves `true` when written, `false` when `ifAbsent` found the key already there. */
  put(key: string, body: Uint8Array | string, options?: PutOptions): Promise<boolean>;
  /** Resolves `null` when the key does not exist. */
  get(key: string): Promise<Uint8Array | null>;
  /** Every key under `prefix`, in lexical order, across all pages. */
  list(prefix: string): Promise<string[]>;
  delete(key: string): Promise<void>;
}
