/** Tool use as an EnvironmentDefinition: tasks, episodes, sampling and the scripted policies. */
import type { EnvironmentDefinition } from '../environment.ts';
import { scriptedPolicy, seededPolicy } from '../policies/scripted.ts';
import type { SeededRandom } from '../random.ts';
import { sampleSplit } from '../task-sampler.ts';
import { generateDatabase } from './database.ts';
import { ToolsEnvironment } from './environment.ts';
import { generateToolsTask, solveToolsTask, ToolsOptions, ToolsTask } from './task.ts';
import { Currency } from './tools.ts';

/** Arguments that pass each tool's schema, chosen at random (lookups may still find nothing). */
function randomCall(random: SeededRandom, task: ToolsTask): { tool: string; arguments: Record<string, unknown> } {
  const db = generateDatabase(task.db);
  const date = () => `20${random.range(10, 25)}-0${random.range(1, 9)}-${random.range(10, 28)}`;
  const choices: Array<() => { tool: string; arguments: Record<string, unknown> }> = [
    () => ({ tool: 'find_person', arguments: { name: random.pick(db.people).name.split(' ')[0] } }),
    () => ({ tool: 'list_orders', arguments: { personId: random.pick(db.people).id } }),
    () => ({ tool: 'get_product', arguments: { product: random.pick(db.products).name, currency: random.pick(Currency.options) } }),
    () => ({ tool: 'calculator', arguments: { expression: `${random.range(1, 99)} ${random.pick(['+', '-', '*', '/'])} ${random.range(1, 99)}` } }),
    () => ({ tool: 'convert_units', arguments: { value: random.range(1, 100), from: 'kg', to: random.pick(['lb', 'oz', 'g']) } }),
    () => ({ tool: 'date_add', arguments: { date: date(), days: random.range(-1000, 1000) } }),
    () => ({ tool: 'date_diff', arguments: { from: date(), to: date() } }),
    () => ({ tool: 'answer', arguments: { value: random.range(0, 1000) } }),
  ];
  return random.pick(choices)();
}

export const tools: EnvironmentDefinition<ToolsTask, ToolsOptions> = {
  name: 'tools',
  taskSchema: ToolsTask,
  optionsSchema: ToolsOptions,
  async create(task, options) {
    return new ToolsEnvironment(task, options);
  },
  sampleTasks(split, n, seed) {
    return sampleSplit({ idPrefix: 'tools', generate: generateToolsTask }, split, n, seed);
  },
  oracle(task) {
    return scriptedPolicy(
      solveToolsTask(task).calls.map((c) => JSON.stringify(c)),
      'the tools oracle',
    );
  },
  random(task, _options, seed) {
    return seededPolicy(seed, (random) => JSON.stringify(randomCall(random, task)));
  },
};
