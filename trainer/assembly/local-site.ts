/**
 * The local site (the embedded default): a filesystem store under `storeRoot` and either the local worker pool opening
 * the same directory, its workers given the inference server's token as ESOPT_TOKEN, or (`in-process`)
 * the episodes played in this process on the run's engine.
 */
import { join } from 'node:path';
import type { RunConfig } from '../../shared/schemas/index.ts';
import { inProcessFanout, localPool } from './fanouts.ts';
import type { Site } from './site.ts';
import { storeAt } from './stores.ts';

/** The local site of a run: the store under `storeRoot`; the pool, sized by the run's config, gets the server's token. */
export function localSite(storeRoot: string, config: Pick<RunConfig, 'workers' | 'localEpisodes'>, token?: string): Site {
  const store = storeAt(storeRoot);
  if (config.localEpisodes === 'in-process') {
    const fanout = inProcessFanout(store);
    return { store, fanout, locate: (key) => join(storeRoot, key), useEngine: (engine) => fanout.useEngine(engine), close: () => fanout.close() };
  }
  const fanout = localPool({ workers: config.workers, store: { kind: 'fs', root: storeRoot }, env: token ? { ESOPT_TOKEN: token } : {} });
  return {
    store,
    fanout,
    locate: (key) => join(storeRoot, key),
    warm: () => fanout.warm(),
    close: () => fanout.close(),
  };
}
