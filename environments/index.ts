/**
 * The registry of environments by name. Each one is loaded lazily, so a sudoku episode never pays for
 * Chromium (web) or isolated-vm (heuristic). Adding an environment is one line here: its folder
 * exports its `EnvironmentDefinition` from `<name>/definition.ts`.
 */
import { z } from 'zod';
import { EnvironmentName } from '../shared/schemas/index.ts';
import type { EnvironmentDefinition } from './environment.ts';

type Loader = () => Promise<EnvironmentDefinition>;

const loaders: Partial<Record<EnvironmentName, Loader>> = {
  sudoku: async () => (await import('./sudoku/definition.ts')).sudoku,
  tools: async () => (await import('./tools/definition.ts')).tools,
  web: async () => (await import('./web/definition.ts')).web,
  heuristic: async () => (await import('./heuristic/definition.ts')).heuristic,
  rollout: async () => (await import('./rollout/definition.ts')).rollout,
  openenv: async () => (await import('./openenv/definition.ts')).openenv,
};

/** Names of the environments that are implemented (a subset of `EnvironmentName`). */
export function environmentNames(): EnvironmentName[] {
  return EnvironmentName.options.filter((name) => loaders[name] !== undefined);
}

/** The definition of an environment; a clear error names the known ones when `name` is not one. */
export async function loadEnvironment(name: string): Promise<EnvironmentDefinition> {
  const known = environmentNames();
  const parsed = EnvironmentName.safeParse(name);
  const loader = parsed.success ? loaders[parsed.data] : undefined;
  if (!loader) throw new Error(`unknown environment ${JSON.stringify(name)} (known: ${known.join(', ') || 'none'})`);
  return loader();
}

/**
 * Validates a task or options value with the environment's schema. The error names the environment,
 * what was checked and every failing field path, so a bad `--task` or EpisodeRequest is easy to fix.
 */
export function parseWith<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new Error(`invalid ${what}:\n${z.prettifyError(r.error)}`);
  return r.data;
}
