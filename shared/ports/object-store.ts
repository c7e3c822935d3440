/** The object store port: S3 in the cloud, a directory on a laptop. Keys follow `shared/keys.ts`. */
export interface PutOptions {
  /** Create-only: if the key exists, nothing is written and `put` resolves to `false`. */
  ifAbsent?: boolean;
  contentType?: string;
  /**
   * Object tags (S3 stores them with the object; a bucket's lifecycle rules may select by them, as the stack's
   * expire transcripts: `retentionTags`). A store without lifecycle rules (the filesystem) ignores them.
   */
  tags?: Record<string, string>;
}

/** What a streamed transfer checks and reports as its bytes pass, once, without holding them. */
export interface StreamOptions {
  /**
   * The content's sha256 (64 hex digits): a body that hashes otherwise is refused with a
   * `ContentMismatchError` and nothing is stored under the key (`putFile`) or the file is removed (`getToFile`).
   */
  sha256?: string;
  /** Bytes moved so far, called as they pass. */
  onProgress?: (bytes: number) => void;
}

/** An object as a listing names it: its key, and when it was last written (S3's LastModified, a file's mtime). */
export interface ListedObject {
  key: string;
  modifiedAt: Date;
}

export interface ObjectStore {
  /** Resolves `true` when written, `false` when `ifAbsent` found the key already there. */
  put(key: string, body: Uint8Array | string, options?: PutOptions): Promise<boolean>;
  /** Resolves `null` when the key does not exist. */
  get(key: string): Promise<Uint8Array | null>;
  /**
   * The file at `path` stored under `key`, streamed: the object is never in memory whole, whatever its
   * size. A reader sees the old object or the new one, never a part of either.
   */
  putFile(key: string, path: string, options?: PutOptions & StreamOptions): Promise<boolean>;
  /**
   * The object streamed into the file at `path` (created or truncated); `false`, and no file, when the key
   * does not exist. A failure may leave a partial file: callers write under a temporary name.
   */
  getToFile(key: string, path: string, options?: StreamOptions): Promise<boolean>;
  /** Every key under `prefix`, in lexical order, across all pages. */
  list(prefix: string): Promise<string[]>;
  /** `list` with each object's last write, for what may be deleted only once it is old enough. */
  listObjects(prefix: string): Promise<ListedObject[]>;
  /**
   * One level below `prefix` (empty or ending in `/`), as S3's delimiter listing gives it: for every key under
   * it, `prefix` and the key's next segment, with a `/` after it when the key goes on (a "folder", named once),
   * in lexical order. Reads only the names at that level, however many objects lie below them.
   */
  listChildren(prefix: string): Promise<string[]>;
  delete(key: string): Promise<void>;
}
