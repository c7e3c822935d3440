/**
 * Full mode with a prepacked session per member: θ is perturbed in place and a session is made from it
 * (from the ORT-format bytes θ lives in, or by encoding the graph), so decoding runs at initializer speed
 * for a session build per switch. θ's own session is released while a member's serves, so the process
 * holds one prepacked copy of θ at a time.
 */
import type * as ort from 'onnxruntime-node';
import type { Member } from '../../../shared/schemas/index.ts';
import type { EngineUpdate, Population } from '../engine.ts';
import { applyFullUpdate, forEachMember, type FullModeTheta } from './full-mode-switch.ts';
import type { DecodeRows, MemberWeights } from './member-weights.ts';

export class FullRebuildSessionMembers implements MemberWeights {
  private population: Population | null = null;

  constructor(
    private readonly theta: FullModeTheta,
    /** θ's own session; null while released, made again when θ's own rows come. */
    private session: ort.InferenceSession | null,
    /** A session for θ as it is now. */
    private readonly newSession: () => Promise<ort.InferenceSession>,
  ) {}

  generate(members: ReadonlyArray<Member | null>, decode: DecodeRows): Promise<void> {
    return forEachMember(this.theta, members, this.population, async (rows, perturbed) => {
      let memberSession: ort.InferenceSession | null = null;
      if (perturbed) {
        await this.session?.release();
        this.session = null;
        memberSession = await this.newSession();
      }
      try {
        await decode(memberSession ?? (this.session ??= await this.newSession()), rows, () => ({}));
      } finally {
        await memberSession?.release();
      }
    });
  }

  setPopulation(p: Population | null): void {
    this.population = p;
  }

  /** θ's session is stale: release it (it is made again when θ's own rows come, perhaps after a member's). */
  async refresh(): Promise<void> {
    await this.session?.release();
    this.session = null;
  }

  async applyUpdate(u: EngineUpdate): Promise<void> {
    applyFullUpdate(this.theta, u);
    await this.refresh();
  }

  async close(): Promise<void> {
    await this.theta.switcher.close();
    await this.session?.release();
  }
}
