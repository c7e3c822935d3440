/**
 * Web manipulation as an EnvironmentDefinition: tasks, episodes on a shared server and browser, sampling and
 * the scripted policies. The browser runtime (runtime.ts: playwright-core, happy-dom, the task server) is
 * loaded by `create` only, so validating a config (the Api function) never loads a browser driver.
 */
import type { EnvironmentDefinition } from '../environment.ts';
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
  async create(task, options) {
    const { taskServer, webBackend } = await import('./runtime.ts');
    // The backend first: a missing Chromium is reported before anything starts.
    const backend = webBackend(options);
    if ('miniwob' in task) return new MiniwobEnvironment(task, options, await taskServer(), backend);
    return new WebEnvironment(task, options, await taskServer(), backend);
  },
  sampleTasks(split, n, seed, options) {
    if (options.miniwob) {
      const names = options.miniwob.tasks ?? miniwobTaskNames(options.miniwob.dir);
      return sampleSplit({ idPrefix: 'miniwob', generate: (random) => ({ miniwob: random.pick(names), seed: random.uint32() }) }, split, n, seed);
    }
    const types = options.taskTypes ?? TASK_TYPE_NAMES;
    return sampleSplit({ idPrefix: 'web', generate: (random) => ({ type: random.pick(types), seed: random.uint32() }) }, split, n, seed);
  },
  oracle(task) {
    if ('miniwob' in task) throw new Error('MiniWoB pages have no scripted oracle here: they judge themselves; use random, or a model');
    return oraclePolicy(taskType(task.type).generate(new SeededRandom(task.seed)).plan);
  },
  random(_task, _options, seed) {
    return randomPolicy(seed);
  },
};
