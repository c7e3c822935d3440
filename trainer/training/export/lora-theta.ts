/**
 * θ of a LoRA run without an onnxruntime session: the adapter vector from the run seed (PEFT's init), laid
 * out and updated exactly as the engine's LoRA strategy does (the same layout, segments and dense update),
 * so a replay here reaches the engine's θ bit for bit; and θ merged into the base weights, W + (α/r)·(B·A)ᵀ
 * per adapted matrix, for an export that loads as a plain model.
 */
import { applyDenseUpdate } from '../../../shared/es.ts';
import { initLoraAdapters, mergeLora, type LoraLayout, type LoraOptions } from '../../../shared/lora.ts';
import { targetsAll } from '../../../shared/targets.ts';
import type { EngineUpdate } from '../../engine/engine.ts';
import type { ThetaHolder } from '../loop/index.ts';
import { loraMatrices, loraSegments } from '../../engine/model/lora-matrices.ts';
import type { LoadedModel } from '../../engine/model/model-dir.ts';

export interface LoraTheta extends ThetaHolder {
  layout: LoraLayout;
  /** The adapter vector the segments view. */
  adapters: Float32Array;
  /** Slot i's matrix, as an index into the model's weights. */
  weights: number[];
}

export function loraTheta(model: LoadedModel, lora: LoraOptions, runSeed: number): LoraTheta {
  const { targets, layout } = loraMatrices(model, lora);
  const adapters = initLoraAdapters(layout, runSeed);
  const segments = loraSegments(adapters, layout);
  return {
    layout,
    adapters,
    weights: targets.map((t) => t.weight),
    segments: () => segments,
    // nothing derived from θ is held here
    commitUpdate: async () => {},
    applyUpdate: async (u: EngineUpdate) => {
      if (u.noise) throw new Error(`noise "${u.noise}" is for full mode; lora mode's updates use esopt-noise`);
      if (u.targets && !targetsAll(u.targets)) throw new Error('lora mode updates every adapter; run targets do not apply');
      applyDenseUpdate(segments, u.runSeed, u.iteration, u.coefficients, { decay: u.decay ?? 0 });
    },
  };
}

/** Writes each adapted matrix's merge into the model's weights (fp32 masters), in place. */
export function mergeIntoModel(model: LoadedModel, theta: LoraTheta): void {
  theta.layout.slots.forEach((slot, i) => {
    const w = model.weights[theta.weights[i]];
    w.data.set(mergeLora(w.data, theta.adapters, theta.layout, slot));
  });
}
