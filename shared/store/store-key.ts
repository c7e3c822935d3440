/**
 * What both adapters accept as a key: a relative, `/`-separated path with no empty, `.` or `..`
 * segments. The filesystem adapter maps keys onto paths, so this is what keeps a key inside its root;
 * S3 would accept more, but one rule for both keeps the adapters interchangeable.
 */
const RESERVED_PREFIX = '.esopt-tmp/';

export function assertStoreKey(key: string): string {
  if (typeof key !== 'string' || key.length === 0 || key.length > 1024) {
    throw new Error(`invalid store key ${JSON.stringify(key)}: must be 1-1024 characters`);
  }
  // The staging directory itself too: as a key it would collide with the directory (a raw ENOTEMPTY).
  if (key.startsWith(RESERVED_PREFIX) || key === RESERVED_PREFIX.slice(0, -1)) throw new Error(`invalid store key ${JSON.stringify(key)}: "${RESERVED_PREFIX}" is reserved`);
  if (/[\\\0]/.test(key)) throw new Error(`invalid store key ${JSON.stringify(key)}: no backslashes or NUL bytes`);
  for (const segment of key.split('/')) {
    if (segment === '' || segment === '.' || segment === '..') {
      throw new Error(`invalid store key ${JSON.stringify(key)}: empty, "." and ".." segments are not allowed`);
    }
  }
  return key;
}

/** Prefixes may be empty or end in `/` or mid-name; they only filter, so the rule is looser. */
export function assertStorePrefix(prefix: string): string {
  if (prefix === '') return prefix;
  if (/[\\\0]/.test(prefix) || prefix.startsWith('/') || prefix.split('/').some((s) => s === '.' || s === '..')) {
    throw new Error(`invalid store prefix ${JSON.stringify(prefix)}`);
  }
  return prefix;
}

/** Where the filesystem adapter stages writes; inside the root so `rename`/`link` stay on one filesystem. */
export const FS_STAGING_DIR = RESERVED_PREFIX.slice(0, -1);
