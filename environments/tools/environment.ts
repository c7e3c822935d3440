/** One tool-use episode: the question, tool calls executed against the task's database, the answer. */
import type { PolicyReply, ToolSpec } from '../../shared/ports/policy.ts';
import type { Environment, StepResult } from '../environment.ts';
import { answerMatches } from './answer.ts';
import { generateDatabase, type Database } from './database.ts';
import { solveToolsTask, type ToolsOptions, type ToolsSolution, type ToolsTask } from './task.ts';
import { parseToolCall } from './tool-call.ts';
import { ANSWER_TOOL, AnswerArguments, findTool, TOOLS } from './tools.ts';

export const TOOLS_SYSTEM_PROMPT = [
  'You answer questions about a small database of people, their orders and a product catalogue, using tools.',
  'Each turn, call exactly one tool by replying with one JSON object:',
  '{"tool": "<name>", "arguments": {...}}',
  'The result comes back as the next message. When you know the answer, call the answer tool: {"tool": "answer", "arguments": {"value": ...}}.',
  'Tools (arguments as JSON Schema):',
  ...TOOLS.map((t) => `- ${t.name}: ${t.description} Arguments: ${JSON.stringify(compactSchema(t.spec.parameters))}`),
].join('\n');

/** With `toolCalls`: the template lists the tools and says how to call them, so the prompt only sets the task. */
export const TOOLS_CALLS_SYSTEM_PROMPT = [
  'You answer questions about a small database of people, their orders and a product catalogue, using the tools you are given.',
  'Call one tool per turn; its result comes back as the next message. When you know the answer, call the answer tool with it.',
].join('\n');

/** The schema without JSON-Schema boilerplate, to keep the prompt short. */
function compactSchema(schema: Record<string, unknown>): unknown {
  const { $schema: _s, additionalProperties: _a, ...rest } = schema;
  return rest;
}

export class ToolsEnvironment implements Environment {
  readonly horizon: number;
  readonly systemPrompt: string;
  readonly tools?: ToolSpec[];
  private readonly solution: ToolsSolution;
  private readonly db: Database;
  private steps = 0;
  private done = true;

  constructor(task: ToolsTask, options: ToolsOptions) {
    this.solution = solveToolsTask(task);
    this.db = generateDatabase(task.db);
    this.horizon = options.horizon ?? this.solution.calls.length + options.slack;
    this.systemPrompt = options.toolCalls ? TOOLS_CALLS_SYSTEM_PROMPT : TOOLS_SYSTEM_PROMPT;
    // `$schema` is noise in a prompt; additionalProperties stays, it lets a forced call follow the schema.
    if (options.toolCalls) this.tools = TOOLS.map(({ spec: { parameters: { $schema: _s, ...parameters }, ...spec } }) => ({ ...spec, parameters }));
  }

  async reset(_seed: number): Promise<string> {
    this.steps = 0;
    this.done = false;
    return `Question: ${this.solution.question}\nYou have at most ${this.horizon} tool calls, the answer included.`;
  }

  async step(action: PolicyReply): Promise<StepResult> {
    if (this.done) throw new Error('step() after the episode ended; call reset() first');
    this.steps++;
    const left = this.horizon - this.steps;
    const outOfSteps = left <= 0;
    const fail = (error: string, tool?: string): StepResult => {
      this.done = outOfSteps;
      const observation = `Error: ${error}${outOfSteps ? '\nNo tool calls left; the episode is over.' : `\n(${left} tool call(s) left)`}`;
      return { observation, done: outOfSteps, ...(outOfSteps ? { reward: 0 } : {}), info: { ok: false, error, ...(tool ? { tool } : {}) } };
    };

    const call = parseToolCall(action);
    if (!call.ok) return fail(call.error);
    const tool = findTool(call.name);
    if (!tool) return fail(`unknown tool "${call.name}" (tools: ${TOOLS.map((t) => t.name).join(', ')})`, call.name);
    const outcome = tool.execute(call.arguments, this.db);
    if (!outcome.ok) return fail(outcome.error, tool.name);

    if (tool.name === ANSWER_TOOL) {
      const { value } = AnswerArguments.parse(call.arguments);
      const correct = answerMatches(value, this.solution.answer);
      this.done = true;
      return { observation: `Answer recorded: ${JSON.stringify(value)}.`, done: true, reward: correct ? 1 : 0, info: { ok: true, tool: tool.name, correct } };
    }
    const note = call.note ? ` (${call.note})` : '';
    const result = `Result of ${tool.name}${note}: ${JSON.stringify(outcome.result)}`;
    if (outOfSteps) {
      this.done = true;
      return { observation: `${result}\nNo tool calls left and no answer given; the episode is over.`, done: true, reward: 0, info: { ok: true, tool: tool.name } };
    }
    return { observation: `${result}\n(${left} tool call(s) left)`, done: false, info: { ok: true, tool: tool.name } };
  }

  async close(): Promise<void> {}
}
