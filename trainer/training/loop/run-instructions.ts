/**
 * A run's instructions (c_t): pinned to a manifest at its start — a run stored already keeps the manifest
 * it was created with, so a resume from the config file never picks up a later push — and read once, so
 * every episode request carries the documents and no worker reads the store for them.
 */
import { pinInstructionsName, resolveInstructions } from '../../../shared/instructions-catalog.ts';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { RunConfig, type EpisodeInstructions } from '../../../shared/schemas/index.ts';
import { readJson } from '../../../shared/store/json.ts';

export async function pinRunInstructions(store: ObjectStore, run: string, config: RunConfig): Promise<RunConfig> {
  const ref = config.instructions;
  if (!ref || ref.manifest !== undefined) return config;
  const stored = (await readJson(store, keys.config(run), RunConfig))?.instructions;
  const manifest = stored?.name === ref.name && stored.manifest !== undefined ? stored.manifest : (await pinInstructionsName(store, ref)).manifest;
  return { ...config, instructions: { name: ref.name, manifest } };
}

/** The pinned instructions with their documents; null for a run without instructions. */
export async function openRunInstructions(store: ObjectStore, config: RunConfig): Promise<EpisodeInstructions | null> {
  const ref = config.instructions;
  if (!ref) return null;
  if (ref.manifest === undefined) throw new Error(`instructions ${ref.name} are not pinned to a manifest: the run's start pins them (pinRunInstructions)`);
  return resolveInstructions(store, { name: ref.name, manifest: ref.manifest });
}
