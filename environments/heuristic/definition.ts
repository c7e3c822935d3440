/** Heuristic design as an EnvironmentDefinition: tasks, episodes, sampling and the scripted policies. */
import type { EnvironmentDefinition } from '../environment.ts';
import { scriptedPolicy, seededPolicy } from '../policies/scripted.ts';
import { sampleSplit } from '../task-sampler.ts';
import { HeuristicEnvironment } from './environment.ts';
import { PROBLEMS } from './problems/index.ts';
import { HeuristicOptions, HeuristicTask } from './task.ts';

const fenced = (code: string) => `\`\`\`js\n${code}\n\`\`\``;

export const heuristic: EnvironmentDefinition<HeuristicTask, HeuristicOptions> = {
  name: 'heuristic',
  taskSchema: HeuristicTask,
  optionsSchema: HeuristicOptions,
  async create(task, options) {
    return new HeuristicEnvironment(task, options);
  },
  sampleTasks(split, n, seed, options) {
    return sampleSplit(
      { idPrefix: 'heuristic', generate: (random) => ({ problem: random.pick(options.problems), seed: random.uint32() }) },
      split,
      n,
      seed,
    );
  },
  oracle(task) {
    return scriptedPolicy([...PROBLEMS[task.problem].oracleSubmissions.map(fenced), 'done'], 'the heuristic oracle');
  },
  random(task, _options, seed) {
    return seededPolicy(seed, (random) => fenced(PROBLEMS[task.problem].randomCode(random)));
  },
};
