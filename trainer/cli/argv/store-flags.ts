/** `--store DIR | --cloud`, as the commands that work on a store's records take them. */
import { z } from 'zod';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { bucketStoreFromEnv } from '../../assembly/cloud-stack.ts';
import { storeAt } from '../../assembly/stores.ts';
import { flag, type FlagSpec, type Parsed } from './args.ts';
import { UsageError } from './usage-error.ts';

export const storeFlags = { store: { type: 'string' }, cloud: { type: 'boolean' } } as const satisfies FlagSpec;

/** The embedded store's default root, as `esopt train` uses it. */
export const DEFAULT_STORE_ROOT = '.esopt/store';

export interface ChosenStore {
  store: ObjectStore;
  /** Where it is, for people: the directory or `s3://bucket`. */
  where: string;
  close(): void;
}

/** The fs store under --store (default .esopt/store), or with --cloud the stack's bucket (ESOPT_BUCKET). */
export function storeFromFlags(p: Parsed, env: Record<string, string | undefined> = process.env): ChosenStore {
  if (!p.values.cloud) {
    const root = p.values.store === undefined ? DEFAULT_STORE_ROOT : flag(p.values, 'store', z.string().min(1));
    return { store: storeAt(root), where: root, close: () => {} };
  }
  if (p.values.store !== undefined) throw new UsageError('give one of --store DIR or --cloud');
  try {
    const { store, bucket } = bucketStoreFromEnv(env);
    return { store, where: `s3://${bucket}`, close: () => store.destroy() };
  } catch (err) {
    throw new UsageError(`--cloud: ${(err as Error).message}`);
  }
}
