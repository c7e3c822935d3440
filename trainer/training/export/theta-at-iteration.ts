/**
 * θ_K of a run: its model opened as the trainer opens it, the newest verified checkpoint at or below K,
 * and the log replayed through iteration K − 1's update, each step checked against the logged θ hash.
 */
import { resolveModelSpec } from '../model-store/resolve-model.ts';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import type { RunConfig } from '../../../shared/schemas/index.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import { readLog } from '../loop/index.ts';
import { readRunConfig } from '../loop/index.ts';
import { restoreFromLog } from '../loop/index.ts';
import type { LoadedModel } from '../../engine/model/model-dir.ts';
import { openModel } from '../../engine/model/open-model.ts';
import { modelTheta } from './model-theta.ts';
import { loraTheta, mergeIntoModel, type LoraTheta } from './lora-theta.ts';

export interface ThetaAtIteration {
  config: RunConfig;
  /** The run's model with θ_K in its weights (LoRA mode: the base weights merged with θ_K's adapters). */
  model: LoadedModel;
  /** LoRA mode: θ_K itself, the adapters, with their layout. */
  lora?: LoraTheta;
  /** K: the number of updates θ holds. */
  iteration: number;
  thetaHash: string;
  /** The checkpoint θ was restored from (null: θ_0, the model as opened). */
  checkpoint: number | null;
  /** Log entries replayed on top of it. */
  replayed: number;
}

/** θ_K (K defaults to the latest the log holds); K past the log is an error naming what the log holds. */
export async function thetaAtIteration(store: ObjectStore, run: string, iteration?: number): Promise<ThetaAtIteration> {
  const config = await readRunConfig(store, run);
  if (!config) throw new Error(`no run ${run} in the store (no ${keys.config(run)})`);
  const log = await readLog(store, run);
  const latest = log.length ? log[log.length - 1].iteration + 1 : 0;
  const k = iteration ?? latest;
  if (!Number.isInteger(k) || k < 0) throw new Error(`iteration must be an integer ≥ 0, got ${k}`);
  if (k > latest) throw new Error(`iteration ${k} is beyond run ${run}'s log, which holds ${latest === 0 ? 'no update yet (only θ_0)' : `the updates of iterations 0…${latest - 1} (θ_0 … θ_${latest})`}`);
  // a named model is the one the run pinned, pulled into the verified cache
  const model = openModel(await resolveModelSpec(config.model, store));
  const lora = config.mode === 'lora' ? loraTheta(model, config.lora!, config.seed) : undefined;
  const theta = lora ?? modelTheta(model, config.mode);
  const restored = await restoreFromLog(store, run, theta, config.rank, k);
  if (restored.next !== k) throw new Error(`run ${run}: θ reached iteration ${restored.next}, not ${k} (the log has a gap)`);
  if (lora) mergeIntoModel(model, lora);
  return { config, model, ...(lora ? { lora } : {}), iteration: k, thetaHash: hashTheta(theta.segments()), checkpoint: restored.checkpoint, replayed: restored.replayed };
}
