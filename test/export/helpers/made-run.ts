/**
 * A run's store as the trainer leaves it, made without episodes: the stored config, then each update as a
 * log entry applied to a real engine through the trainer's own update path (applyLogEntry, the function
 * resume and the replicas replay with), its θ hash logged, and full checkpoints where asked. Only the
 * rewards are made up (fixed, unequal, so every update moves θ).
 */
import { esAt } from '../../../shared/schedule.ts';
import { resolveModelSpec } from '../../../trainer/training/model-store/resolve-model.ts';
import { keys } from '../../../shared/keys.ts';
import { RunConfig, type LogEntry, type ModelSpec, type RunConfigInput } from '../../../shared/schemas/index.ts';
import { FsObjectStore } from '../../../shared/store/fs.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import type { Engine, PerturbationMode } from '../../../trainer/engine/engine.ts';
import { appendLog, writeCheckpoint } from '../../../trainer/training/loop/checkpoints.ts';
import { writeJson } from '../../../shared/store/json.ts';
import { applyLogEntry } from '../../../trainer/training/loop/weight-update.ts';
import { createEngine } from '../../../trainer/engine/model/create-engine.ts';

export interface MadeRun {
  store: FsObjectStore;
  run: string;
  config: RunConfig;
  /** θ_0 … θ_N's hashes. */
  hashes: string[];
  /** The engine that made the run, holding θ_N. */
  engine: Engine;
}

export async function madeRun(o: { root: string; run: string; model: ModelSpec; mode: PerturbationMode; updates: number; checkpoints?: number[]; alpha?: number; rank?: number; lora?: RunConfigInput['lora'] }): Promise<MadeRun> {
  const store = new FsObjectStore(o.root);
  const config = RunConfig.parse({
    environment: { name: 'sudoku', options: {} },
    model: o.model,
    mode: o.mode,
    rank: o.rank ?? 2,
    ...(o.lora ? { lora: o.lora } : {}),
    es: { population: 4, sigma: 0.05, alpha: o.alpha ?? 0.5, weightDecay: 0.01 },
    iterations: Math.max(1, o.updates),
    seed: 17,
  });
  await writeJson(store, keys.config(o.run), config, true);
  const engine = await createEngine({ model: await resolveModelSpec(config.model, store), mode: config.mode, ...(config.lora ? { lora: { ...config.lora, seed: config.seed } } : {}) });
  const hashes = [hashTheta(engine.segments())];
  for (let k = 0; k < o.updates; k++) {
    if (o.checkpoints?.includes(k)) await writeCheckpoint(store, o.run, k, engine.segments());
    const entry: LogEntry = {
      iteration: k,
      runSeed: config.seed,
      ...esAt(config.es, k, config.iterations),
      weightDecay: config.es.weightDecay,
      members: [0, 0, 1, 1].map((noiseIndex, i) => ({ noiseIndex: noiseIndex + 2 * k, sign: i % 2 ? -1 : 1 })),
      normalizedRewards: [1.2, -0.8, 0.3 - k / 10, -0.7],
      thetaHashAfter: '',
    };
    await applyLogEntry(engine, entry, config.rank);
    hashes.push(hashTheta(engine.segments()));
    await appendLog(store, o.run, { ...entry, thetaHashAfter: hashes[k + 1] });
  }
  if (o.checkpoints?.includes(o.updates)) await writeCheckpoint(store, o.run, o.updates, engine.segments());
  return { store, run: o.run, config, hashes, engine };
}
