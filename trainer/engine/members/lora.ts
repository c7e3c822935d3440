/**
 * LoRA-ES members: θ is the adapter vector; the base weights W are graph inputs of the low-rank graph (only
 * the adapted matrices rewritten), fed from the model's arrays every run and never changed — as inputs they
 * are held once, where initializers would be copied into the session and prepacked beside the arrays. Every row — the base row on θ's own adapters,
 * a member's on θ + sign·σ·ε over the adapter vector — arrives as factor inputs, so one forward pass serves
 * rows of many members. An update is a dense update of the adapter vector: no session is rebuilt.
 */
import type * as ort from 'onnxruntime-node';
import { applyDenseUpdate, type ParameterSegment } from '../../../shared/es.ts';
import type { LoraLayout } from '../../../shared/lora.ts';
import { memberAdapters } from '../../../shared/lora-members.ts';
import type { Member } from '../../../shared/schemas/index.ts';
import { targetsAll } from '../../../shared/targets.ts';
import type { EngineUpdate, Population } from '../engine.ts';
import { loraGroupFactors } from '../perturbation/lora-factors.ts';
import { groupFeeds, type GroupFactors } from '../perturbation/lowrank-factors.ts';
import type { LowRankGroup, LowRankTarget } from '../perturbation/lowrank-graph.ts';
import type { DecodeRows, MemberWeights } from './member-weights.ts';

export class LoraMembers implements MemberWeights {
  private population: Population | null = null;
  /** θ's own adapters as factors; null after θ changed. */
  private base: GroupFactors[] | null = null;
  /** The live population's members' factors, by member index. */
  private readonly members = new Map<number, GroupFactors[]>();

  constructor(
    private readonly session: ort.InferenceSession,
    private readonly targets: LowRankTarget[],
    private readonly groups: LowRankGroup[],
    private readonly layout: LoraLayout,
    /** The adapter vector, which `segments` view. */
    private readonly theta: Float32Array,
    private readonly segments: ParameterSegment[],
    /** The base weights, fed as the graph's inputs (the same tensors every run). */
    private readonly weights: Record<string, ort.Tensor>,
  ) {}

  async generate(members: ReadonlyArray<Member | null>, decode: DecodeRows): Promise<void> {
    await decode(this.session, members.map((_, i) => i), (chunk) => {
      const rows = chunk.map((k) => this.factorsOf(members[k]));
      return groupFeeds(this.targets, this.groups, chunk.length, this.layout.rank, (g, b) => rows[b][g]);
    }, this.weights);
  }

  private factorsOf(member: Member | null): GroupFactors[] {
    if (!member) return (this.base ??= loraGroupFactors(this.theta, this.layout, this.targets, this.groups));
    let made = this.members.get(member.index);
    if (!made) {
      const p = this.population!;
      const adapters = memberAdapters(this.theta, this.layout, { runSeed: p.runSeed, iteration: p.iteration, member: member.noiseIndex }, member.sign * p.sigma);
      made = loraGroupFactors(adapters, this.layout, this.targets, this.groups);
      this.members.set(member.index, made);
    }
    return made;
  }

  setPopulation(p: Population | null): void {
    // the adapters are θ: a population never narrows them (lora.targets chose the matrices)
    if (p?.targets && !targetsAll(p.targets)) throw new Error('lora mode perturbs every adapter; run targets do not apply (set lora.targets)');
    this.population = p;
    this.members.clear();
  }

  /** θ was written behind the strategy's back: the factors made from it are stale (W did not change). */
  async refresh(): Promise<void> {
    this.base = null;
    this.members.clear();
  }

  async applyUpdate(u: EngineUpdate): Promise<void> {
    if (u.targets && !targetsAll(u.targets)) throw new Error('lora mode updates every adapter; run targets do not apply (set lora.targets)');
    applyDenseUpdate(this.segments, u.runSeed, u.iteration, u.coefficients, { decay: u.decay ?? 0 });
    await this.refresh();
  }

  async close(): Promise<void> {
    await this.session.release();
  }
}
