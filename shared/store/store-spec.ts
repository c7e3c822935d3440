/**
 * Which ObjectStore to open, as data: what a worker process or a Lambda's environment is told so it
 * writes to the same store the trainer reads.
 */
import { z } from 'zod';
import type { ObjectStore } from '../ports/object-store.ts';
import { FsObjectStore } from './fs.ts';
import { S3ObjectStore, S3StoreConfig } from './s3.ts';

export const StoreSpec = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('fs'), root: z.string().min(1) }).strict(),
  S3StoreConfig.extend({ kind: z.literal('s3') }).strict(),
]);
export type StoreSpec = z.infer<typeof StoreSpec>;
export type StoreSpecInput = z.input<typeof StoreSpec>;

export function openStore(spec: StoreSpecInput): ObjectStore {
  const s = StoreSpec.parse(spec);
  if (s.kind === 'fs') return new FsObjectStore(s.root);
  const { kind: _kind, ...config } = s;
  return new S3ObjectStore(config);
}
