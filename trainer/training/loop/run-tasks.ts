/**
 * Where a run's tasks come from: its environment's generator (environments/task-sampler.ts), or the task
 * suite its config names (`tasks.suite`), read once at run start from the manifest the run is pinned to.
 * Either way a sample is deterministic in (split, count, seed): an iteration's training tasks at its own
 * seed (task-seed.ts), the held-out set at the run's, so a resumed run draws exactly the same tasks.
 */
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { keys } from '../../../shared/keys.ts';
import { RunConfig, type TaskRef } from '../../../shared/schemas/index.ts';
import { readJson } from '../../../shared/store/json.ts';
import type { EnvironmentDefinition } from '../../../environments/environment.ts';
import { heldOutTasks } from '../../../environments/task-sampler.ts';
import { pinSuiteName, readSuite } from '../../../environments/task-suites/suite-catalog.ts';
import { sampleSuite } from '../../../environments/task-suites/sample-suite.ts';
import { suiteFitIssues } from '../../../environments/task-suites/suite-fit.ts';
import { splitCounts } from '../../../environments/task-suites/suite-splits.ts';

export interface RunTasks {
  /** The suite the tasks are drawn from, pinned; null: the environment's generator. */
  readonly suite: { name: string; manifest: string } | null;
  /** An iteration's training tasks, drawn at that iteration's task seed. */
  train(n: number, seed: number): TaskRef[];
  /** The held-out tasks evaluations run on (eval and validation never share a task). */
  heldOut(split: 'eval' | 'validation', n: number, seed: number): TaskRef[];
}

/**
 * The config with its suite pinned to a manifest. A run stored already keeps the manifest it was created
 * with (a resume brings the config file again, not the hash); a new one takes the name's current manifest.
 */
export async function pinRunSuite(store: ObjectStore, run: string, config: RunConfig): Promise<RunConfig> {
  const suite = config.tasks.suite;
  if (!suite || suite.manifest !== undefined) return config;
  const stored = (await readJson(store, keys.config(run), RunConfig))?.tasks.suite;
  const manifest = stored?.name === suite.name && stored.manifest !== undefined ? stored.manifest : (await pinSuiteName(store, suite)).manifest;
  return { ...config, tasks: { ...config.tasks, suite: { name: suite.name, manifest } } };
}

const refs = (tasks: readonly { id: string; task: unknown }[]): TaskRef[] => tasks.map((t) => ({ id: t.id, task: t.task }));

/** The run's task source; a suite is checked to hold the run's environment and enough tasks in each split it draws from. */
export async function openRunTasks(store: ObjectStore, config: RunConfig, environment: EnvironmentDefinition, options: unknown): Promise<RunTasks> {
  const ref = config.tasks.suite;
  if (!ref) {
    return {
      suite: null,
      train: (n, seed) => refs(environment.sampleTasks('train', n, seed, options)),
      heldOut: (split, n, seed) => refs(heldOutTasks(environment, split, n, seed, options)),
    };
  }
  if (ref.manifest === undefined) throw new Error(`tasks.suite ${ref.name} is not pinned to a manifest: the run's start pins it (pinRunSuite)`);
  const suite = await readSuite(store, ref.manifest);
  if (!suite) throw new Error(`tasks.suite.manifest: no task suite ${ref.manifest} in the store (the run was pinned to it; was it deleted?)`);
  const pinned = { name: ref.name, manifest: ref.manifest, environment: suite.environment, splits: splitCounts(suite.tasks) };
  const { trainPerIteration, evalCount, evalSplit } = config.tasks;
  const issues = suiteFitIssues(pinned, config.environment.name, [
    { split: 'train', count: trainPerIteration, path: 'tasks.trainPerIteration' },
    { split: evalSplit, count: evalCount, path: 'tasks.evalCount' },
  ], 'tasks.suite');
  if (issues.length) throw new Error(issues.map((i) => `${i.path}: ${i.message}`).join('; '));
  const named = { name: ref.name, tasks: suite.tasks };
  return {
    suite: { name: ref.name, manifest: ref.manifest },
    train: (n, seed) => refs(sampleSuite(named, 'train', n, seed)),
    heldOut: (split, n, seed) => refs(sampleSuite(named, split, n, seed)),
  };
}
