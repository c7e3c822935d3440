/**
 * Low-rank members (EGGROLL): W stays an initializer and each row's member arrives as factor inputs, so
 * one forward pass serves rows of many members. An update is folded into W and the session rebuilt.
 */
import type * as ort from 'onnxruntime-node';
import type { Member } from '../../../shared/schemas/index.ts';
import type { EngineUpdate, Population } from '../engine.ts';
import { foldLowRankUpdate } from '../perturbation/lowrank-fold.ts';
import { FactorCache, zeroFactorFeeds } from '../perturbation/lowrank-factors.ts';
import type { LowRankGroup, LowRankTarget } from '../perturbation/lowrank-graph.ts';
import type { LoadedModel } from '../model/model-dir.ts';
import type { TargetTensors } from '../model/target-tensors.ts';
import type { DecodeRows, MemberWeights } from './member-weights.ts';

export class LowRankMembers implements MemberWeights {
  private population: Population | null = null;
  private factorCache: FactorCache | null = null;

  constructor(
    private readonly model: LoadedModel,
    private session: ort.InferenceSession,
    private readonly targets: LowRankTarget[],
    private readonly groups: LowRankGroup[],
    /** A session for the rewritten graph as W is now. */
    private readonly newSession: () => Promise<ort.InferenceSession>,
    /** Which of the matrices a population or an update names. */
    private readonly targetTensors: TargetTensors,
  ) {}

  async generate(members: ReadonlyArray<Member | null>, decode: DecodeRows): Promise<void> {
    await decode(this.session, members.map((_, i) => i), (chunk) =>
      this.factorCache ? this.factorCache.feeds(chunk.map((k) => members[k])) : zeroFactorFeeds(this.targets, this.groups, chunk.length),
    );
  }

  setPopulation(p: Population | null): void {
    this.population = p;
    this.factorCache = p ? new FactorCache(this.targets, this.groups, p, this.targetTensors.select(p.targets)) : null;
  }

  /** The old session goes first (nothing runs meanwhile), so a refresh never holds two copies of W. */
  async refresh(): Promise<void> {
    await this.session.release();
    this.session = await this.newSession();
  }

  async applyUpdate(u: EngineUpdate): Promise<void> {
    foldLowRankUpdate(this.model.weights, this.targets, u, this.targetTensors.select(u.targets));
    this.factorCache = null;
    await this.refresh();
    if (this.population) this.setPopulation(this.population);
  }

  async close(): Promise<void> {
    await this.session.release();
  }
}
