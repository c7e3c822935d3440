/**
 * One ES update as a log entry, and applying it to θ. An entry's coefficients are a pure function of it
 * (`coefficientsOf`), so the live update, resume and every replica apply the same θ change, bit for bit.
 */
import { esAt } from '../../../shared/schedule.ts';
import { coefficients, type Coefficient, type TellResult } from '../../../shared/es.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import { targetsAll } from '../../../shared/targets.ts';
import { noiseField } from '../../../shared/noise-definition.ts';
import type { Engine } from '../../engine/engine.ts';
import type { IterationManifest, LogEntry, Member, RunConfig, UpdateRecord } from '../../../shared/schemas/index.ts';

/**
 * The log entry of an update: the counted members (index order) with their normalised rewards. The
 * live loop builds it from `tell`; resume and the replicas rebuild it from an UpdateRecord.
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
    ...esAt(config.es, iteration, config.iterations),
    weightDecay: config.es.weightDecay,
    members: normalized.map(({ member }) => {
      const m = byIndex.get(member);
      if (!m) throw new Error(`iteration ${iteration}: member ${member} is not in the manifest`);
      return { noiseIndex: m.noiseIndex, sign: m.sign };
    }),
    normalizedRewards: normalized.map((n) => n.value),
    // recorded where they are not all of θ, so a log of `all` reads as it always did
    ...(targetsAll(config.targets) ? {} : { targets: config.targets }),
    ...noiseField(config.noise),
    ...(config.instructions?.manifest !== undefined ? { instructions: { name: config.instructions.name, manifest: config.instructions.manifest } } : {}),
    thetaHashAfter,
  };
}

/** The log entry of a recorded update (its iteration's manifest names the members). */
export function logEntryOfRecord(config: RunConfig, manifest: IterationManifest, update: UpdateRecord): LogEntry {
  return logEntryFor(config, update.iteration, manifest.members, update.normalizedRewards, update.thetaHashAfter);
}

/** The coefficients of an entry: its members' noise and sign weighted by their normalised rewards. */
export function coefficientsOf(entry: LogEntry): Coefficient[] {
  if (entry.members.length !== entry.normalizedRewards.length) {
    throw new Error(`log entry of iteration ${entry.iteration} has ${entry.members.length} members but ${entry.normalizedRewards.length} rewards`);
  }
  return coefficients(entry.members, entry.normalizedRewards, entry.alpha);
}

/**
 * θ ← (1 − α·λ)·θ + Σ_j coef_j·ε_j through the engine (dense in full mode, low-rank factors in low-rank
 * mode) over the entry's targets, the noise regenerated from the entry's run seed and iteration.
 */
export async function applyCoefficients(weights: Pick<Engine, 'applyUpdate'>, entry: LogEntry, coefs: Coefficient[], rank: number): Promise<void> {
  await weights.applyUpdate({ runSeed: entry.runSeed, iteration: entry.iteration, coefficients: coefs, rank, decay: entry.alpha * entry.weightDecay, ...(entry.targets ? { targets: entry.targets } : {}), ...(entry.noise ? { noise: entry.noise } : {}) });
}

/** Replays a logged (or recorded) update: its coefficients, computed once, applied. */
export async function applyLogEntry(weights: Pick<Engine, 'applyUpdate'>, entry: LogEntry, rank: number): Promise<void> {
  await applyCoefficients(weights, entry, coefficientsOf(entry), rank);
}

/**
 * The live update: tell's coefficients applied to θ (the same numbers `coefficientsOf` gives for the
 * returned entry), and the entry with θ's new hash.
 */
export async function applyTold(
  weights: Pick<Engine, 'applyUpdate' | 'segments'>,
  config: RunConfig,
  iteration: number,
  members: readonly Member[],
  told: TellResult,
): Promise<LogEntry> {
  const entry = logEntryFor(config, iteration, members, normalizedOf(told), '');
  await applyCoefficients(weights, entry, told.coefficients, config.rank);
  return { ...entry, thetaHashAfter: hashTheta(weights.segments()) };
}

/** tell's output in the UpdateRecord's shape. */
export function normalizedOf(told: TellResult): Array<{ member: number; value: number }> {
  return told.counted.map((member, i) => ({ member, value: told.normalized[i] }));
}
