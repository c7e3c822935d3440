/**
 * Tool use as an EnvironmentDefinition: tasks, episodes, sampling and the scripted policies. A task is a
 * built-in one (its `kind` names a question about the synthetic database) or `{kind: "mcp", question, verifier}`,
 * played against the MCP servers the options name (mcp/): the two never mix in one run.
 */
import { z } from 'zod';
import type { Policy, PolicyReply } from '../../shared/ports/policy.ts';
import { DEPLOYED_CONTEXT, type EnvironmentDefinition } from '../environment.ts';
import { scriptedPolicy, seededPolicy } from '../policies/scripted.ts';
import { SeededRandom, deriveSeed } from '../random.ts';
import { sampleSuite } from '../task-suites/sample-suite.ts';
import { sampleSplit } from '../task-sampler.ts';
import { generateDatabase } from './database.ts';
import { ToolsEnvironment } from './environment.ts';
import { createMcpEpisode } from './mcp/episode.ts';
import { McpToolsTask } from './mcp/options.ts';
import { generateToolsTask, solveToolsTask, ToolsOptions, ToolsTask } from './task.ts';
import { ANSWER_TOOL, Currency } from './tools.ts';

/** Either kind of task the environment plays; `kind` tells them apart (and names the field at fault). */
export const ToolsEnvironmentTask = z.discriminatedUnion('kind', [ToolsTask, McpToolsTask]);
export type ToolsEnvironmentTask = z.infer<typeof ToolsEnvironmentTask>;

const MCP_NEEDS_SERVERS = 'an mcp task ({kind: "mcp"}) needs MCP servers: set options.mcp.servers';
const BUILTIN_WITH_MCP = 'with options.mcp the tasks are {kind: "mcp", question, verifier}: a built-in tools task has no MCP servers to play against';

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

/**
 * Random play against MCP tools: a random offered tool with no arguments (the server judges them), or one time
 * in four a random answer. The tools are the chat `tools` when offered so, else the prompt's `- name:` lines.
 */
function randomMcpPolicy(seed: number): Policy {
  return {
    async act(messages, { step, tools }): Promise<PolicyReply> {
      const random = new SeededRandom(deriveSeed(seed, step));
      const names = (tools?.map((t) => t.name) ?? [...(messages[0]?.content ?? '').matchAll(/^- ([A-Za-z0-9_-]{1,64}): /gm)].map((m) => m[1]!)).filter((n) => n !== ANSWER_TOOL);
      const call = names.length === 0 || random.int(4) === 0 ? { name: ANSWER_TOOL, arguments: { value: random.range(0, 1000) } } : { name: random.pick(names), arguments: {} };
      const none = { tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 };
      return tools ? { text: '', toolCalls: [call], ...none } : { text: JSON.stringify({ tool: call.name, arguments: call.arguments }), ...none };
    },
  };
}

export const tools: EnvironmentDefinition<ToolsEnvironmentTask, ToolsOptions> = {
  name: 'tools',
  taskSchema: ToolsEnvironmentTask,
  optionsSchema: ToolsOptions,
  async create(task, options, context = DEPLOYED_CONTEXT) {
    if (task.kind === 'mcp') {
      if (!options.mcp) throw new Error(MCP_NEEDS_SERVERS);
      return createMcpEpisode(task, options.mcp, { toolCalls: options.toolCalls, ...(options.horizon !== undefined ? { horizon: options.horizon } : {}) }, context);
    }
    if (options.mcp) throw new Error(BUILTIN_WITH_MCP);
    return new ToolsEnvironment(task, options);
  },
  sampleTasks(split, n, seed, options) {
    if (options.mcp) {
      if (!options.mcp.tasks) throw new Error('MCP tools have no task generator: list tasks in options.mcp.tasks, or push a task suite (esopt tasks push FILE.jsonl --environment tools)');
      // Split by each task's content hash, as a pushed suite is: train and held-out tasks never meet.
      return sampleSuite({ name: 'mcp', tasks: options.mcp.tasks }, split, n, seed);
    }
    return sampleSplit({ idPrefix: 'tools', generate: generateToolsTask }, split, n, seed);
  },
  oracle(task) {
    if (task.kind === 'mcp') {
      // Only an answer verifier says what the answer is; a predicate or a verifier tool keeps it to itself.
      if (task.verifier.kind !== 'answer') throw new Error(`an mcp task verified by a ${task.verifier.kind} has no oracle: esopt cannot know its answer (use random, replay:FILE or a model)`);
      return scriptedPolicy([JSON.stringify({ tool: ANSWER_TOOL, arguments: { value: task.verifier.answer } })], 'the mcp answer oracle');
    }
    return scriptedPolicy(
      solveToolsTask(task).calls.map((c) => JSON.stringify(c)),
      'the tools oracle',
    );
  },
  random(task, _options, seed) {
    if (task.kind === 'mcp') return randomMcpPolicy(seed);
    return seededPolicy(seed, (random) => JSON.stringify(randomCall(random, task)));
  },
};
