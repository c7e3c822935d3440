/**
 * The embedded run target: a filesystem store under `storeRoot` and either the local worker pool opening
 * the same directory, its workers given the inference server's token as ESOPT_TOKEN, or (`in-process`)
 * the episodes played in this process on the run's engine.
 */
import { join } from 'node:path';
import { FsObjectStore } from '../../shared/store/fs.ts';
import type { RunConfig } from '../../shared/schemas/index.ts';
import { InProcessFanout } from '../fanout/in-process.ts';
import { LocalFanout } from '../fanout/local.ts';
import type { Site } from './site.ts';

export function localSite(storeRoot: string, o: { workers: number; token?: string; localEpisodes?: RunConfig['localEpisodes'] }): Site {
  const store = new FsObjectStore(storeRoot);
  if (o.localEpisodes === 'in-process') {
    const fanout = new InProcessFanout(store);
    return { store, fanout, locate: (key) => join(storeRoot, key), useEngine: (engine) => fanout.useEngine(engine), close: () => fanout.close() };
  }
  const fanout = new LocalFanout({ workers: o.workers, store: { kind: 'fs', root: storeRoot }, env: o.token ? { ESOPT_TOKEN: o.token } : {} });
  return {
    store,
    fanout,
    locate: (key) => join(storeRoot, key),
    warm: () => fanout.warm(),
    close: () => fanout.close(),
  };
}
