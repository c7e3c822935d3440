/**
 * One ES update as a log entry, and applying it to θ. The live loop and resume both go through
 * `applyLogEntry`, so θ_k = θ_checkpoint replayed through the log is the same code path, bit for bit.
 */
import { tell, type TellResult } from '../../shared/es.ts';
import type { Engine } from '../engine.ts';
import type { LogEntry, Member, RunConfig } from '../../shared/schemas/index.ts';

/**
 * The log entry of an update: the counted members (index order) with their normalised rewards. The
 * live loop builds it from `tell`; resume rebuilds it from an UpdateRecord with the same function.
 */
export function logEntryFor(
  config: RunConfig,
  iteration: number,
  members: readonly Member[],
  normalized: ReadonlyArray<{ member: number; value: number }>,
  thetaHashAfter: string,
): LogEntry {
  const byIndex = new Map(members.map((m) => [m.index, m]));
  return {
    iteration,
    runSeed: config.seed,
    sigma: config.es.sigma,
    alpha: config.es.alpha,
    weightDecay: config.es.weightDecay,
    members: normalized.map(({ member }) => {
      const m = byIndex.get(member);
      if (!m) throw new Error(`iteration ${iteration}: member ${member} is not in the manifest`);
      return { noiseIndex: m.noiseIndex, sign: m.sign };
    }),
    normalizedRewards: normalized.map((n) => n.value),
    thetaHashAfter,
  };
}

/** tell's output in the UpdateRecord's shape. */
export function normalizedOf(told: TellResult): Array<{ member: number; value: number }> {
  return told.counted.map((member, i) => ({ member, value: told.normalized[i] }));
}

/**
 * Applies the entry's update to θ through the engine (dense in full mode, low-rank factors in low-rank
 * mode). The coefficients are recomputed with `tell` over the normalised rewards (shaping 'none'), which
 * sums them in the same order with the same arithmetic as the original `tell`, so replay reproduces the
 * live update bit for bit. Weight decay is decoupled: θ is scaled by (1 − α·λ).
 */
export async function applyLogEntry(weights: Pick<Engine, 'applyUpdate'>, entry: LogEntry, rank: number): Promise<void> {
  if (entry.members.length !== entry.normalizedRewards.length) {
    throw new Error(`log entry of iteration ${entry.iteration} has ${entry.members.length} members but ${entry.normalizedRewards.length} rewards`);
  }
  const members = entry.members.map((m, index) => ({ index, noiseIndex: m.noiseIndex, sign: m.sign }));
  const rewards = new Map(entry.normalizedRewards.map((r, i) => [i, [r]]));
  const { coefficients } = tell(members, rewards, { alpha: entry.alpha, shaping: 'none' });
  await weights.applyUpdate({ runSeed: entry.runSeed, iteration: entry.iteration, coefficients, rank, decay: entry.alpha * entry.weightDecay });
}
