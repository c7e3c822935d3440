/**
 * Which of a model's matrices LoRA-ES attaches adapters to, and θ's segments in that mode. The candidates
 * are the matrices a MatMul reads as x·W (low-rank mode's, less a tied head: its table is also an embedding,
 * which a LoRA adapter of a linear layer does not describe); `lora.targets` chooses among them as run targets
 * choose (shared/targets.ts). The order is the weights' (canonical) order, which fixes θ's layout.
 */
import type { ParameterSegment } from '../../../shared/es.ts';
import { loraLayout, type LoraLayout, type LoraOptions } from '../../../shared/lora.ts';
import { lowRankTargets, type LowRankTarget } from '../perturbation/lowrank-graph.ts';
import type { LoadedModel } from './model-dir.ts';
import { TargetTensors } from './target-tensors.ts';

export interface LoraMatrices {
  /** The adapted matrices, slot i = target i. */
  targets: LowRankTarget[];
  layout: LoraLayout;
  /** The adapted matrices as run targets name them (Engine.targetTensors). */
  targetTensors: TargetTensors;
}

export function loraMatrices(model: LoadedModel, options: Pick<LoraOptions, 'rank' | 'alpha' | 'targets'>): LoraMatrices {
  const file = model.file ?? `${model.dir}/model.onnx`;
  const candidates = lowRankTargets(model.graph, model.weights, file).filter((t) => !t.transposed);
  let chosen: ReadonlySet<number> | null;
  try {
    chosen = new TargetTensors(model, candidates.map((t) => t.weight), "LoRA's matrices").select(options.targets);
  } catch (err) {
    // the selection's errors name `targets…`; in this mode the field is the run config's lora.targets
    throw new Error(`lora.${(err as Error).message}`);
  }
  const targets = candidates.filter((t) => !chosen || chosen.has(t.weight));
  const layout = loraLayout(targets.map((t) => ({ name: t.name, in: t.m, out: t.n })), options);
  return { targets, layout, targetTensors: new TargetTensors(model, targets.map((t) => t.weight), "LoRA's adapted matrices") };
}

/**
 * θ's segments: each slot's A then B as views into the one adapter vector, each at its own offset in the
 * members' noise stream, so a dense update over the segments is the update of the whole vector.
 */
export function loraSegments(theta: Float32Array, layout: LoraLayout): ParameterSegment[] {
  return layout.slots.flatMap((s) => [
    { name: `${s.name}#lora_A`, data: theta.subarray(s.aOffset, s.bOffset), offset: s.aOffset },
    { name: `${s.name}#lora_B`, data: theta.subarray(s.bOffset, s.bOffset + s.out * layout.rank), offset: s.bOffset },
  ]);
}
