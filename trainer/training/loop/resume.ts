/**
 * Resume: θ restored from the newest verified checkpoint and the log (restore.ts), then an update that
 * was recorded but not yet logged replayed from its UpdateRecord (never re-collected, so no late record
 * sneaks in) and logged, then the metrics rows a killed process left out filled in.
 */
import { keys } from '../../../shared/keys.ts';
import { IterationManifest, RunConfig, UpdateRecord } from '../../../shared/schemas/index.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import { appendLog } from './checkpoints.ts';
import type { LoopContext } from './loop-context.ts';
import { fillMetricsHoles } from './metrics-row.ts';
import { restoreFromLog, type Restored } from './restore.ts';
import { readJson, writeJson } from '../../../shared/store/json.ts';
import { applyLogEntry, logEntryOfRecord } from './weight-update.ts';

/** The run's config as stored by its first start; `train --resume` continues with exactly this one. */
export async function readRunConfig(store: ObjectStore, run: string): Promise<RunConfig | null> {
  return readJson(store, keys.config(run), RunConfig);
}

/** A new run stores its config; a resumed one must bring the same. */
export async function claimRunConfig(store: ObjectStore, run: string, config: RunConfig): Promise<void> {
  const stored = await readRunConfig(store, run);
  if (stored && JSON.stringify(stored) !== JSON.stringify(config)) throw new Error(`run ${run} exists with a different config; resume it with its own config or pick another run id`);
  if (!stored) await writeJson(store, keys.config(run), config, true);
}

export async function resume(ctx: Pick<LoopContext, 'store' | 'run' | 'config' | 'weights'>): Promise<Restored> {
  const { store, run, config, weights } = ctx;
  const restored = await restoreFromLog(store, run, weights, config.rank);
  let { next, replayed } = restored;
  for (; next < config.iterations; next++, replayed++) {
    const update = await readJson(store, keys.update(run, next), UpdateRecord);
    if (!update) break;
    const manifest = await readJson(store, keys.manifest(run, next), IterationManifest);
    if (!manifest) throw new Error(`iteration ${next} has an update record but no manifest`);
    const entry = logEntryOfRecord(config, manifest, update);
    await applyLogEntry(weights, entry, config.rank);
    const h = hashTheta(weights.segments());
    if (h !== update.thetaHashAfter) throw new Error(`replaying the update record of iteration ${next} gave θ ${h}, it says ${update.thetaHashAfter}`);
    await appendLog(store, run, entry);
  }
  await fillMetricsHoles(store, run, config, next);
  return { next, replayed, checkpoint: restored.checkpoint, skippedCheckpoints: restored.skippedCheckpoints };
}
