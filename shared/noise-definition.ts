/**
 * Which noise definition a run draws its members' ε from (RunConfig `noise`): 'esopt-noise' (shared/noise.ts,
 * Philox + ziggurat Gaussians, the default) or 'esopt-device-noise' (shared/device-noise.ts, made on a GPU by
 * 32-bit integer ops; full mode only). One definition per run: its members, updates, checkpoints, resume,
 * replicas and replay all read ε from it. Manifests, log entries, populations and updates carry the name only
 * when it is not the default, so runs on the default write what they always wrote.
 */
import { z } from 'zod';

export const NoiseDefinitionName = z.enum(['esopt-noise', 'esopt-device-noise']);
export type NoiseDefinitionName = z.infer<typeof NoiseDefinitionName>;

/** The definition a run uses when it names none. */
export const DEFAULT_NOISE: NoiseDefinitionName = 'esopt-noise';

/** The only non-default definition, the value the optional fields hold. */
export const DeviceNoiseName = z.literal('esopt-device-noise');
export type DeviceNoiseName = z.infer<typeof DeviceNoiseName>;

/** `{ noise }` to spread into a manifest, entry, population or update: empty on the default. */
export function noiseField(noise: NoiseDefinitionName | undefined): { noise?: DeviceNoiseName } {
  return noise === 'esopt-device-noise' ? { noise } : {};
}
