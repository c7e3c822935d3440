/**
 * How an engine serves members of the population from its one copy of θ: one strategy a file.
 *   full-inputs           θ fed as graph inputs, perturbed in place per member (training memory = inference)
 *   full-rebuild-session  θ perturbed in place, a prepacked session made per member (initializer speed)
 *   lowrank               W an initializer; per-row factor inputs serve many members in one forward pass
 *   lora                  θ is LoRA adapters; the low-rank graph's per-row factors carry each row's adapters
 */
import type * as ort from 'onnxruntime-node';
import type { Member } from '../../../shared/schemas/index.ts';
import type { EngineUpdate, Population } from '../engine.ts';

/** Decodes the given rows (by index) on `session`, with `feeds(chunk)` added to each batch's inputs. */
/**
 * Decodes `rows` on `session`; `feeds(chunk)` gives a batch's extra inputs (full mode: the same for every row;
 * low-rank and LoRA: per row), `shared` inputs the same for every row beside per-row ones (LoRA's base weights).
 */
export type DecodeRows = (session: ort.InferenceSession, rows: number[], feeds: (chunk: number[]) => Record<string, ort.Tensor>, shared?: Record<string, ort.Tensor>) => Promise<void>;

export interface MemberWeights {
  /**
   * Decodes every row on its member's weights (null: θ itself), members of the population last set. Never runs
   * concurrently with another call.
   */
  generate(members: ReadonlyArray<Member | null>, decode: DecodeRows): Promise<void>;
  /** The live population changed (the one way a strategy learns it): keep what its members need. */
  setPopulation(p: Population | null): void;
  /** θ was written behind the strategy's back (a loaded checkpoint): rebuild what depends on it. */
  refresh(): Promise<void>;
  applyUpdate(u: EngineUpdate): Promise<void>;
  close(): Promise<void>;
}
