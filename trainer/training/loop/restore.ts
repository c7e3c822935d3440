/**
 * θ rebuilt from the store: the newest verified checkpoint, replayed through the log. The trainer and
 * every replica restore through this one function, so they reach the same θ bit for bit.
 */
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { IterationManifest } from '../../../shared/schemas/index.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import type { Engine } from '../../engine/engine.ts';
import { loadLatestCheckpoint, readLog } from './checkpoints.ts';
import { readJson } from '../../../shared/store/json.ts';
import { applyLogEntry } from './weight-update.ts';

/** θ: views onto the live weights, and the update applied in the engine's own mode. */
export type ThetaHolder = Pick<Engine, 'segments' | 'applyUpdate' | 'commitUpdate'>;

export interface Restored {
  /** The first iteration whose update θ does not hold yet. */
  next: number;
  /** Log entries applied on top of the checkpoint. */
  replayed: number;
  /** The iteration of the checkpoint θ was loaded from; null when it started from the model's θ_0. */
  checkpoint: number | null;
  skippedCheckpoints: Array<{ iteration: number; reason: string }>;
}

/**
 * θ after the updates of iterations below `atMost` (θ_atMost; default: the whole log): the newest verified
 * checkpoint at or below it, then the log entries after that checkpoint and below `atMost`.
 */
export async function restoreFromLog(store: ObjectStore, run: string, weights: ThetaHolder, rank: number, atMost = Infinity): Promise<Restored> {
  const segments = weights.segments();
  const loaded = await loadLatestCheckpoint(store, run, segments, atMost);
  // A loaded checkpoint wrote θ behind the engine's back: let it refresh what depends on θ.
  if (loaded) await weights.commitUpdate();
  let next = loaded?.meta.iteration ?? 0;
  if (!loaded) {
    const first = await readJson(store, keys.manifest(run, 0), IterationManifest);
    if (first && first.thetaHash !== hashTheta(segments)) throw new Error(`the model's θ_0 (${hashTheta(segments)}) is not run ${run}'s θ_0 (${first.thetaHash})`);
  }
  let replayed = 0;
  for (const entry of await readLog(store, run)) {
    if (entry.iteration < next) continue;
    if (entry.iteration >= atMost) break;
    if (entry.iteration !== next) throw new Error(`log jumps from iteration ${next - 1} to ${entry.iteration}`);
    await applyLogEntry(weights, entry, rank);
    const h = hashTheta(segments);
    if (h !== entry.thetaHashAfter) throw new Error(`replaying iteration ${entry.iteration} gave θ ${h}, the log says ${entry.thetaHashAfter}`);
    next++;
    replayed++;
  }
  return { next, replayed, checkpoint: loaded?.meta.iteration ?? null, skippedCheckpoints: loaded?.skipped ?? [] };
}
