/**
 * Web manipulation as an EnvironmentDefinition: tasks, episodes on a shared server and browser, sampling and
 * the scripted policies. The browser runtime (runtime.ts: playwright-core, happy-dom, the task server) is
 * loaded by `create` only, so validating a config (the Api function) never loads a browser driver.
 */
import type { EnvironmentDefinition } from '../environment.ts';
import { SeededRandom } from '../random.ts';
import { sampleSplit } from '../task-sampler.ts';
import { WebEnvironment } from './environment.ts';
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
    return new WebEnvironment(task, options, await taskServer(), backend);
  },
  sampleTasks(split, n, seed, options) {
    const types = options.taskTypes ?? TASK_TYPE_NAMES;
    return sampleSplit({ idPrefix: 'web', generate: (random) => ({ type: random.pick(types), seed: random.uint32() }) }, split, n, seed);
  },
  oracle(task) {
    return oraclePolicy(taskType(task.type).generate(new SeededRandom(task.seed)).plan);
  },
  random(_task, _options, seed) {
    return randomPolicy(seed);
  },
};
