/**
 * Web manipulation as an EnvironmentDefinition: tasks, episodes on a shared server and browser, sampling and
 * the scripted policies. The browser runtime (runtime.ts: playwright-core, happy-dom, the task server) is
 * loaded by `create` only, so validating a config (the Api function) never loads a browser driver.
 */
import { DEPLOYED_CONTEXT, OptionsIssue, type EnvironmentDefinition } from '../environment.ts';
import { pinTaskFolder, UnknownTaskFolderError } from './task-folder-catalog.ts';
import { AppEnvironment } from './app-environment.ts';
import { startUrl } from './app-check.ts';
import { SeededRandom } from '../random.ts';
import { sampleSplit } from '../task-sampler.ts';
import { WebEnvironment } from './environment.ts';
import { MiniwobEnvironment, miniwobTaskNames } from './miniwob.ts';
import { oraclePolicy, randomPolicy } from './policies.ts';
import { TASK_TYPE_NAMES, taskType } from './task-types/index.ts';
import { WebOptions, WebTask } from './task.ts';

export const web: EnvironmentDefinition<WebTask, WebOptions> = {
  name: 'web',
  taskSchema: WebTask,
  optionsSchema: WebOptions,
  async create(task, options, context = DEPLOYED_CONTEXT) {
    const { taskServer, webBackend } = await import('./runtime.ts');
    // The backend first: a missing Chromium is reported before anything starts.
    const backend = webBackend(options);
    if ('start' in task) return new AppEnvironment(task, options, backend, context);
    if ('miniwob' in task) {
      const folder = options.miniwob?.folder;
      if (!folder) return new MiniwobEnvironment(task, options, await taskServer(), backend);
      // A pushed folder comes onto this machine's disk by its pinned manifest, checked file by file.
      if (folder.manifest === undefined) throw new Error(`miniwob.folder ${folder.name} is not pinned to a manifest: a run or an evaluation pins it when it is created`);
      if (!context.store) throw new Error('a pushed task folder is read from the store, and this episode was given none');
      const { materializeTaskFolder } = await import('./task-folder-catalog.ts');
      const dir = await materializeTaskFolder(context.store, folder.manifest);
      return new MiniwobEnvironment(task, { ...options, miniwob: { ...options.miniwob!, dir, folder: undefined } }, await taskServer(), backend);
    }
    return new WebEnvironment(task, options, await taskServer(), backend);
  },
  taskIssue(task, options) {
    if ('start' in task) {
      if (!options.app) return 'a task with a start and a check needs the app option: { url } (the app under evaluation)';
      try {
        startUrl(task.start, options.app);
      } catch (err) {
        return (err as Error).message;
      }
    }
    if ('miniwob' in task && !options.miniwob) return 'a MiniWoB task needs the miniwob option';
    return null;
  },
  async pinOptions(options, store) {
    const miniwob = options.miniwob;
    if (!miniwob?.folder) return options;
    let pinned;
    try {
      pinned = await pinTaskFolder(store, miniwob.folder);
    } catch (err) {
      if (err instanceof UnknownTaskFolderError) throw new OptionsIssue(`miniwob.folder.${err.field}`, err.message);
      throw err;
    }
    const missing = (miniwob.tasks ?? []).findIndex((t) => !pinned.tasks.includes(t));
    if (missing >= 0) throw new OptionsIssue(`miniwob.tasks.${missing}`, `task folder ${pinned.name} has no page html/miniwob/${miniwob.tasks![missing]}.html`);
    return { ...options, miniwob: { ...miniwob, folder: { name: pinned.name, manifest: pinned.manifest }, tasks: miniwob.tasks ?? pinned.tasks } };
  },
  sampleTasks(split, n, seed, options) {
    if (options.app) throw new Error("tasks on a user's app are written, not generated: list them (an evaluation's tasks) or push a task suite (esopt tasks push)");
    if (options.miniwob) {
      const { dir, folder, tasks } = options.miniwob;
      if (!tasks && dir === undefined) throw new Error(`miniwob.folder ${folder?.name} is not pinned: its task names come with its manifest when a run or an evaluation is created`);
      const names = tasks ?? miniwobTaskNames(dir!);
      return sampleSplit({ idPrefix: 'miniwob', generate: (random) => ({ miniwob: random.pick(names), seed: random.uint32() }) }, split, n, seed);
    }
    const types = options.taskTypes ?? TASK_TYPE_NAMES;
    return sampleSplit({ idPrefix: 'web', generate: (random) => ({ type: random.pick(types), seed: random.uint32() }) }, split, n, seed);
  },
  oracle(task) {
    if ('start' in task) throw new Error("a user's app has no scripted oracle: esopt knows its check, not the way there; use random, or a model");
    if ('miniwob' in task) throw new Error('MiniWoB pages have no scripted oracle here: they judge themselves; use random, or a model');
    return oraclePolicy(taskType(task.type).generate(new SeededRandom(task.seed)).plan);
  },
  random(_task, _options, seed) {
    return randomPolicy(seed);
  },
};
