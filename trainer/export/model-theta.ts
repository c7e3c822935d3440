/**
 * θ of a loaded model, updated in a run's mode without an onnxruntime session: full mode's dense update
 * over every tensor, low-rank mode's folded update over its targets — the same functions the engine's
 * strategies call, so a replay here reaches the engine's θ bit for bit, holding θ once.
 */
import { applyDenseUpdate, layoutSegments, type ParameterSegment } from '../../shared/es.ts';
import type { EngineUpdate, PerturbationMode } from '../engine.ts';
import type { WeightHost } from '../loop/index.ts';
import type { LoadedModel } from '../model/model-dir.ts';
import { foldLowRankUpdate } from '../perturbation/lowrank-fold.ts';
import { lowRankTargets } from '../perturbation/lowrank-graph.ts';

export function modelTheta(model: LoadedModel, mode: PerturbationMode): WeightHost {
  const segments: ParameterSegment[] = layoutSegments(model.weights);
  const targets = mode === 'lowrank' ? lowRankTargets(model.graph, model.weights, model.file ?? model.dir) : null;
  return {
    segments: () => segments,
    // nothing derived from θ is held here
    commitUpdate: async () => {},
    applyUpdate: async (u: EngineUpdate) => {
      if (targets) foldLowRankUpdate(model.weights, targets, u);
      else applyDenseUpdate(segments, u.runSeed, u.iteration, u.coefficients, { decay: u.decay ?? 0 });
    },
  };
}
