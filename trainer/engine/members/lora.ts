/**
 * LoRA-ES members: θ is the adapter vector; the base weights W are the LoRA graph's initializers
 * (perturbation/lora-graph.ts), prepacked by onnxruntime and held only by the session (the engine hands its
 * copies over: model/weight-handover.ts), never changed. Each adapted matrix has one stack of adapters —
 * θ's, then each of the population's noise vectors (perturbation/lora-stacks.ts) — and a row chooses its
 * member by its mask alone, so one forward pass serves rows of many members and nothing is copied per row.
 * An update is a dense update of the adapter vector in place, copied into the stacks' θ slot: no session is
 * rebuilt.
 */
import type { ParameterSegment } from '../../../shared/es.ts';
import { applyDenseUpdate } from '../../../shared/es.ts';
import type { LoraLayout } from '../../../shared/lora.ts';
import type { Member } from '../../../shared/schemas/index.ts';
import { targetsAll } from '../../../shared/targets.ts';
import type * as ort from 'onnxruntime-node';
import type { EngineUpdate, Population } from '../engine.ts';
import { LoraStacks } from '../perturbation/lora-stacks.ts';
import type { DecodeRows, MemberWeights } from './member-weights.ts';

export class LoraMembers implements MemberWeights {
  /** The live population's stacks (θ's slot alone when there is none). */
  private stacks: LoraStacks;

  constructor(
    private readonly session: ort.InferenceSession,
    private readonly layout: LoraLayout,
    /** The adapter vector, which `segments` view. */
    private readonly theta: Float32Array,
    private readonly segments: ParameterSegment[],
  ) {
    this.stacks = new LoraStacks(layout, null);
    this.stacks.writeTheta(theta);
  }

  async generate(members: ReadonlyArray<Member | null>, decode: DecodeRows): Promise<void> {
    const stacks = this.stacks;
    // each noise slot a batch needs is filled before the first forward, once per population
    for (const m of members) if (m) stacks.ensure(m.noiseIndex);
    await decode(this.session, members.map((_, i) => i), (chunk) => stacks.mask(chunk.map((k) => members[k])), stacks.feeds());
  }

  setPopulation(p: Population | null): void {
    // the adapters are θ: a population never narrows them (lora.targets chose the matrices)
    if (p?.targets && !targetsAll(p.targets)) throw new Error('lora mode perturbs every adapter; run targets do not apply (set lora.targets)');
    // The new population takes the old buffers over. A decode still running reads them safely: slots are
    // written only by generate, applyUpdate and refresh, which the engine runs one at a time, so nothing
    // writes a slot before that decode has ended.
    this.stacks = new LoraStacks(this.layout, p, this.stacks);
    if (!this.stacks.hasTheta) this.stacks.writeTheta(this.theta);
  }

  /** θ was written behind the strategy's back: its slot is copied again. */
  async refresh(): Promise<void> {
    this.stacks.writeTheta(this.theta);
  }

  async applyUpdate(u: EngineUpdate): Promise<void> {
    if (u.targets && !targetsAll(u.targets)) throw new Error('lora mode updates every adapter; run targets do not apply (set lora.targets)');
    applyDenseUpdate(this.segments, u.runSeed, u.iteration, u.coefficients, { decay: u.decay ?? 0 });
    this.stacks.writeTheta(this.theta);
  }

  async close(): Promise<void> {
    await this.session.release();
  }
}
