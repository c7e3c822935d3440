/**
 * Full mode with θ fed as graph inputs: one session whose weights are inputs, so perturbing θ in place is
 * all a member switch takes and the process holds θ once (training memory = inference memory).
 */
import * as ort from 'onnxruntime-node';
import type { Member } from '../../../shared/schemas/index.ts';
import type { EngineUpdate, Population } from '../engine.ts';
import { applyFullUpdate, forEachMember, type FullModeTheta } from './full-mode-switch.ts';
import type { DecodeRows, MemberWeights } from './member-weights.ts';

export class FullInputsMembers implements MemberWeights {
  private population: Population | null = null;

  constructor(
    private readonly theta: FullModeTheta,
    private readonly session: ort.InferenceSession,
  ) {}

  generate(members: ReadonlyArray<Member | null>, decode: DecodeRows): Promise<void> {
    return forEachMember(this.theta, members, this.population, async (rows) => {
      // θ's views change with every switch, so the feeds that wrap them are made after it; an fp16
      // export's weights are cast from their fp32 masters here, once per member
      const { weights, half } = this.theta.model;
      const feeds = half ? half.feeds(weights) : Object.fromEntries(weights.map((w) => [w.name, new ort.Tensor('float32', w.data, w.dims)]));
      await decode(this.session, rows, () => feeds);
    });
  }

  setPopulation(p: Population | null): void {
    this.population = p;
  }

  /** The session reads θ from the live arrays on every run: nothing to rebuild. */
  async refresh(): Promise<void> {}

  async applyUpdate(u: EngineUpdate): Promise<void> {
    applyFullUpdate(this.theta, u);
  }

  async close(): Promise<void> {
    await this.theta.switcher.close();
    await this.session.release();
  }
}
