/**
 * A run's environment options with what they name in the store pinned at its start (a pushed task folder:
 * EnvironmentDefinition.pinOptions). A run stored already keeps the options it was created with, so a resume
 * from the config file never picks up a later push under the same name.
 */
import type { EnvironmentDefinition } from '../../../environments/environment.ts';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { RunConfig } from '../../../shared/schemas/index.ts';
import { readJson } from '../../../shared/store/json.ts';

export async function pinRunOptions(store: ObjectStore, run: string, config: RunConfig, environment: EnvironmentDefinition): Promise<RunConfig> {
  if (!environment.pinOptions) return config;
  const parsed = environment.optionsSchema.parse(config.environment.options ?? {});
  const pinned = await environment.pinOptions(parsed, store);
  if (pinned === parsed) return config;
  const stored = (await readJson(store, keys.config(run), RunConfig))?.environment;
  const options = stored && stored.name === config.environment.name ? stored.options : (pinned as Record<string, unknown>);
  return { ...config, environment: { ...config.environment, options } };
}
