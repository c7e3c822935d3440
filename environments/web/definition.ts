/**
 * Web manipulation as an EnvironmentDefinition: tasks, episodes on a shared server and browser, sampling and
 * the scripted policies. The browser runtime (runtime.ts: playwright-core, happy-dom, the task server) is
 * loaded by `create` only, so validating a config (the Api function) never loads a browser driver.
 */
import { DEPLOYED_CONTEXT, type EnvironmentDefinition } from '../environment.ts';
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
    if ('miniwob' in task) return new MiniwobEnvironment(task, options, await taskServer(), backend);
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
  sampleTasks(split, n, seed, options) {
    if (options.app) throw new Error("tasks on a user's app are written, not generated: list them (an evaluation's tasks) or push a task suite (esopt tasks push)");
    if (options.miniwob) {
      const names = options.miniwob.tasks ?? miniwobTaskNames(options.miniwob.dir);
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
