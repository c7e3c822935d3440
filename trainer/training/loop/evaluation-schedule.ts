/**
 * When θ_k is evaluated: before iteration 0, before every evalInterval-th iteration, and after the last
 * update. Each evaluation is stored once; a resumed run reuses what is there.
 */
import { keys } from '../../../shared/keys.ts';
import { EvaluationResult, type TaskRef } from '../../../shared/schemas/index.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import { evaluate } from './evaluation.ts';
import type { LoopContext } from './loop-context.ts';
import { readJson, writeJson } from '../../../shared/store/json.ts';

export class EvaluationSchedule {
  /** The held-out tasks, the same at every evaluation. */
  private readonly tasks: TaskRef[];

  constructor(
    private readonly ctx: LoopContext,
    private readonly onEvaluation?: (result: EvaluationResult) => void,
  ) {
    const { evalSplit, evalCount, seed } = ctx.config.tasks;
    this.tasks = ctx.tasks.heldOut(evalSplit, evalCount, seed);
  }

  /** The evaluation of θ_k when one is due before iteration k, else null. */
  async before(k: number): Promise<EvaluationResult | null> {
    return k === 0 || k % this.ctx.config.evalInterval === 0 ? this.of(k) : null;
  }

  /** The evaluation of the final θ. */
  async final(): Promise<EvaluationResult> {
    return this.of(this.ctx.config.iterations);
  }

  /** Every stored evaluation of the run, in iteration order. */
  async all(): Promise<EvaluationResult[]> {
    const out: EvaluationResult[] = [];
    for (let k = 0; k <= this.ctx.config.iterations; k++) {
      const e = await readJson(this.ctx.store, keys.evaluationOf(this.ctx.run, k), EvaluationResult);
      if (e) out.push(e);
    }
    return out;
  }

  private async of(k: number): Promise<EvaluationResult> {
    const { store, fanout, run, config, policy, pollMs, weights } = this.ctx;
    const existing = await readJson(store, keys.evaluationOf(run, k), EvaluationResult);
    if (existing) return existing;
    const result = await evaluate({ store, fanout, run, config, iteration: k, thetaHash: hashTheta(weights.segments()), tasks: this.tasks, policy, pollMs, instructions: this.ctx.instructions });
    await writeJson(store, keys.evaluationOf(run, k), result);
    this.onEvaluation?.(result);
    return result;
  }
}
