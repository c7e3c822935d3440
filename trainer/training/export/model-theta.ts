/**
 * θ of a loaded model, updated in a run's mode without an onnxruntime session: full mode's dense update
 * over the targeted tensors, low-rank mode's folded update over its targeted matrices — the same functions
 * and the same target selection the engine's strategies use, so a replay here reaches the engine's θ bit
 * for bit, holding θ once.
 */
import { applyDenseUpdate, layoutSegments, type ParameterSegment } from '../../../shared/es.ts';
import type { EngineUpdate, PerturbationMode } from '../../engine/engine.ts';
import type { ThetaHolder } from '../loop/index.ts';
import type { LoadedModel } from '../../engine/model/model-dir.ts';
import { foldLowRankUpdate } from '../../engine/perturbation/lowrank-fold.ts';
import { lowRankTargets } from '../../engine/perturbation/lowrank-graph.ts';
import { TargetTensors } from '../../engine/model/target-tensors.ts';

export function modelTheta(model: LoadedModel, mode: PerturbationMode): ThetaHolder {
  const segments: ParameterSegment[] = layoutSegments(model.weights);
  const targets = mode === 'lowrank' ? lowRankTargets(model.graph, model.weights, model.file ?? model.dir) : null;
  const chosen = targets
    ? new TargetTensors(model, targets.map((t) => t.weight), "low-rank mode's matrices")
    : new TargetTensors(model, model.weights.map((_, i) => i), "full mode's tensors");
  return {
    segments: () => segments,
    // nothing derived from θ is held here
    commitUpdate: async () => {},
    applyUpdate: async (u: EngineUpdate) => {
      if (targets && u.noise) throw new Error(`noise "${u.noise}" is for full mode; low-rank mode's updates use esopt-noise`);
      const selected = chosen.select(u.targets);
      if (targets) foldLowRankUpdate(model.weights, targets, u, selected);
      else applyDenseUpdate(selected ? segments.filter((_, i) => selected.has(i)) : segments, u.runSeed, u.iteration, u.coefficients, { decay: u.decay ?? 0, ...(u.noise ? { noise: u.noise } : {}) });
    },
  };
}
