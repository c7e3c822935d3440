/**
 * The embedded run target: a filesystem store under `storeRoot` and the local worker pool opening the
 * same directory, its workers given the inference server's token as ESOPT_TOKEN.
 */
import { join } from 'node:path';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { LocalFanout } from './local.ts';
import type { RunTarget } from './run-target.ts';

export function localRunTarget(storeRoot: string, o: { workers: number; token?: string }): RunTarget {
  const fanout = new LocalFanout({ workers: o.workers, store: { kind: 'fs', root: storeRoot }, env: o.token ? { ESOPT_TOKEN: o.token } : {} });
  return {
    store: new FsObjectStore(storeRoot),
    fanout,
    locate: (key) => join(storeRoot, key),
    warm: () => fanout.warm(),
    close: () => fanout.close(),
  };
}
