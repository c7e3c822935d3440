/**
 * LoRA mode's stacks (lora-graph.ts): per adapted matrix, slot 0 holds θ's adapters and slot k ≥ 1 the k-th
 * distinct noise index of the live population (an antithetic pair shares one). Member i's adapters are
 * θ + sign·σ·εᵢ with εᵢ its ordinary seeded stream over the adapter vector (shared/lora-members.ts); a noise
 * slot is filled from that stream the first time a row of its index is decoded, and never again in the
 * population, so a member switch is one ε over the adapter vector and a batch of any members adds only its
 * (rows × (1 + K)) mask. Slot 0 is a copy of θ, written again whenever θ changes (`writeTheta`).
 */
import * as ort from 'onnxruntime-node';
import type { LoraLayout, LoraSlot } from '../../../shared/lora.ts';
import { fillNoise } from '../../../shared/noise.ts';
import type { Member } from '../../../shared/schemas/index.ts';
import type { Population } from '../engine.ts';
import { LORA_MASK, loraInputs } from './lora-graph.ts';

export class LoraStacks {
  /** Noise index → stack slot (1 … K). */
  private readonly slotOf: Map<number, number>;
  /** Which slots hold their vector (slot 0: θ, as last written). */
  private readonly filled: Uint8Array;
  private readonly a: Float32Array[];
  private readonly b: Float32Array[];
  private feedsMade: Record<string, ort.Tensor> | null = null;

  /**
   * The stacks for `population`'s noise indices (null: θ's slot only), in `reuse`'s buffers when it has as
   * many slots: a new population then allocates nothing, and the peak never holds two populations' stacks
   * while the old ones wait for a GC. θ's slot is taken over from `reuse` as it was written.
   */
  constructor(
    private readonly layout: LoraLayout,
    private readonly population: Population | null,
    reuse?: LoraStacks,
  ) {
    const indices = population ? [...new Set(population.members.map((m) => m.noiseIndex))].sort((a, b) => a - b) : [];
    this.slotOf = new Map(indices.map((n, k) => [n, k + 1]));
    const slots = 1 + indices.length;
    const r = layout.rank;
    this.filled = new Uint8Array(slots);
    const same = reuse && reuse.slots === slots && reuse.layout === layout;
    // a slot no row of this population selects keeps whatever it held: its mask entry is 0
    this.a = same ? reuse.a : layout.slots.map((s) => new Float32Array(slots * r * s.in));
    this.b = same ? reuse.b : layout.slots.map((s) => new Float32Array(s.out * slots * r));
    if (same) this.filled[0] = reuse.filled[0];
  }

  /** 1 + K: θ's slot and one per distinct noise index. */
  get slots(): number {
    return this.filled.length;
  }

  /** Whether θ's slot holds θ as last written. */
  get hasTheta(): boolean {
    return this.filled[0] === 1;
  }

  /** Writes `adapters` (a vector of the layout) into `slot`. */
  private write(slot: number, fill: (into: Float32Array, offset: number) => void): void {
    const r = this.layout.rank;
    const slots = this.slots;
    this.layout.slots.forEach((s: LoraSlot, j) => {
      fill(this.a[j].subarray(slot * r * s.in, (slot + 1) * r * s.in), s.aOffset);
      // B is [out, r] row-major in the vector; the stack interleaves the slots per output row: [out, slots, r]
      const eb = new Float32Array(s.out * r);
      fill(eb, s.bOffset);
      const stack = this.b[j];
      for (let o = 0; o < s.out; o++) stack.set(eb.subarray(o * r, (o + 1) * r), (o * slots + slot) * r);
    });
    this.filled[slot] = 1;
  }

  /** Copies θ (the adapter vector) into slot 0: at the start and after every change of θ. */
  writeTheta(theta: Float32Array): void {
    if (theta.length !== this.layout.length) throw new RangeError(`lora: θ has ${theta.length} elements, the layout ${this.layout.length}`);
    this.write(0, (into, offset) => into.set(theta.subarray(offset, offset + into.length)));
  }

  /** Fills the slot of `noiseIndex` from its stream unless it is filled; returns the slot. */
  ensure(noiseIndex: number): number {
    const k = this.slotOf.get(noiseIndex);
    if (k === undefined || !this.population) throw new Error(`lora: noise index ${noiseIndex} is not in the live population`);
    if (!this.filled[k]) {
      const key = { runSeed: this.population.runSeed, iteration: this.population.iteration, member: noiseIndex };
      this.write(k, (into, offset) => fillNoise(into, key, offset));
    }
    return k;
  }

  /** The stacks as the graph's `lora.j.a` / `lora.j.b`. */
  feeds(): Record<string, ort.Tensor> {
    if (this.feedsMade) return this.feedsMade;
    const width = this.slots * this.layout.rank;
    const feeds: Record<string, ort.Tensor> = {};
    this.layout.slots.forEach((s, j) => {
      const io = loraInputs(j);
      feeds[io.a] = new ort.Tensor('float32', this.a[j], [width, s.in]);
      feeds[io.b] = new ort.Tensor('float32', this.b[j], [s.out, width]);
    });
    return (this.feedsMade = feeds);
  }

  /** `lora.mask` for rows of these members (null: a base row): 1 at θ's slot, sign·σ at the member's. */
  mask(rows: ReadonlyArray<Member | null>): Record<string, ort.Tensor> {
    const slots = this.slots;
    const data = new Float32Array(rows.length * slots);
    rows.forEach((m, b) => {
      data[b * slots] = 1;
      if (m) data[b * slots + this.ensure(m.noiseIndex)] = m.sign * this.population!.sigma;
    });
    return { [LORA_MASK]: new ort.Tensor('float32', data, [rows.length, 1, slots, 1]) };
  }
}
