/**
 * One tools episode whose tools are served by MCP servers: the question, one tool call a turn sent to the server
 * that lists it, its result back as the observation (a `tool` message when the tools go as chat `tools`), and
 * the built-in `answer` call to finish, judged by the task's verifier. A call the model got wrong (no call, an
 * unknown tool, arguments that are not an object, a result the tool marks as an error) is an error observation
 * that uses a step, as in the built-in environment; anything wrong with a server (unreachable, too slow, too
 * large, a protocol error) ends the episode with McpFailure's fixed reason.
 */
import type { PolicyReply, ToolSpec } from '../../../shared/ports/policy.ts';
import { evaluatePredicate } from '../../../shared/json-predicate.ts';
import type { Environment, EnvironmentContext, StepResult } from '../../environment.ts';
import { answerMatches } from '../answer.ts';
import { parseToolCall } from '../tool-call.ts';
import { ANSWER_TOOL } from '../tools.ts';
import { connectMcp, McpFailure, type ListedTool, type McpConnection, type McpLimits } from './connection.ts';
import type { McpOptions, McpToolsTask, McpVerifier } from './options.ts';

/** The most a verifier tool's reward may be in absolute value: beyond it a server is broken, not generous. */
export const MAX_ABS_REWARD = 1e6;
/** The tool schemas all together, as the prompt or the chat `tools` carry them. */
const MAX_TOOL_SCHEMA_CHARS = 65_536;
/** A final answer's JSON (what a predicate or a verifier tool reads). */
const MAX_ANSWER_CHARS = 16_384;
/** Horizon when neither the options nor anything else sets one: the built-in tasks need 3-6 calls. */
export const MCP_DEFAULT_HORIZON = 10;

const ANSWER_SPEC: ToolSpec = {
  name: ANSWER_TOOL,
  description: 'Give the final answer and end the episode.',
  parameters: { type: 'object', properties: { value: { description: 'the answer: a string, a number, or JSON when the question asks for it' } }, required: ['value'] },
};

function parameters(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _unused, ...rest } = schema;
  return rest;
}

export function mcpSystemPrompt(instructions: string | undefined, specs: ToolSpec[], toolCalls: boolean): string {
  const lines = [instructions ?? 'You answer a question using tools.'];
  if (toolCalls) {
    lines.push('Call one tool per turn; its result comes back as the next message. When you know the answer, call the answer tool with it.');
  } else {
    lines.push(
      'Each turn, call exactly one tool by replying with one JSON object:',
      '{"tool": "<name>", "arguments": {...}}',
      'The result comes back as the next message. When you know the answer, call the answer tool: {"tool": "answer", "arguments": {"value": ...}}.',
      'Tools (arguments as JSON Schema):',
      ...specs.map((s) => `- ${s.name}: ${s.description.replace(/\s+/g, ' ').trim()} Arguments: ${JSON.stringify(s.parameters)}`),
    );
  }
  return lines.join('\n');
}

/** The value a predicate reads: the answer, or the JSON a string answer spells (`"{\"a\": 1}"`, an object or array). */
function predicateSubject(value: unknown): unknown {
  if (typeof value !== 'string' || !/^\s*[[{]/.test(value)) return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

/** A verifier tool's reward: `structuredContent.reward`, else the text as a number or true/false. */
function rewardOf(result: { text: string; structured?: Record<string, unknown> }, tool: string): number {
  const structured = result.structured?.reward;
  const text = result.text.trim().toLowerCase();
  const reward = typeof structured === 'number' ? structured : typeof structured === 'boolean' ? Number(structured) : text === 'true' ? 1 : text === 'false' ? 0 : /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/.test(text) ? Number(text) : NaN;
  if (!Number.isFinite(reward)) throw new McpFailure(`the verifier tool "${tool}" answered no reward (structuredContent.reward, or a number or true/false as its text)`);
  if (Math.abs(reward) > MAX_ABS_REWARD) throw new McpFailure(`the verifier tool "${tool}"'s reward is beyond ±${MAX_ABS_REWARD}`);
  return reward;
}

async function openAll(o: McpOptions, context: EnvironmentContext, limits: McpLimits): Promise<McpConnection[]> {
  if (context.endpointKey) {
    const origins = new Set(o.servers.flatMap((s) => (s.url ? [new URL(s.url).origin] : [])));
    if (origins.size > 1) throw new McpFailure(`one endpoint key serves one origin; the MCP servers are at ${[...origins].join(', ')}`);
  }
  const settled = await Promise.allSettled(o.servers.map((s) => connectMcp(s, context, limits)));
  const open = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.all(open.map((c) => c.close()));
    throw failed.reason;
  }
  return open;
}

interface Offered {
  tools: Map<string, { connection: McpConnection; tool: ListedTool }>;
  verifier?: { connection: McpConnection; name: string };
}

/** The tools the model is offered, by name, and where the verifier tool is; names must not collide. */
function offer(o: McpOptions, connections: McpConnection[], listed: ListedTool[][], verifier: McpVerifier): Offered {
  const tools: Offered['tools'] = new Map();
  let found: Offered['verifier'];
  connections.forEach((connection, i) => {
    const server = o.servers[i]!;
    const own = listed[i]!;
    for (const name of server.tools ?? []) {
      if (!own.some((t) => t.name === name)) throw new McpFailure(`MCP server "${server.name}" lists no tool "${name}" (named in its tools option)`);
    }
    for (const tool of own) {
      if (verifier.kind === 'tool' && tool.name === verifier.tool && (verifier.server === undefined || verifier.server === server.name)) {
        // The verifier is never offered: a model that could call it would grade its own answers.
        found ??= { connection, name: tool.name };
        continue;
      }
      if (server.tools && !server.tools.includes(tool.name)) continue;
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(tool.name)) throw new McpFailure(`MCP server "${server.name}" lists a tool whose name is not 1-64 letters, digits, _ or -`);
      if (tool.name === ANSWER_TOOL) throw new McpFailure(`MCP server "${server.name}" lists a tool named "${ANSWER_TOOL}", the name of the built-in tool that ends the episode`);
      const other = tools.get(tool.name);
      if (other?.connection === connection) throw new McpFailure(`MCP server "${server.name}" lists the tool "${tool.name}" twice`);
      if (other) throw new McpFailure(`MCP servers "${other.connection.server}" and "${server.name}" both list a tool "${tool.name}"; offer one with the servers' tools option`);
      tools.set(tool.name, { connection, tool });
    }
  });
  if (verifier.kind === 'tool' && !found) throw new McpFailure(`no MCP server${verifier.server ? ` named "${verifier.server}"` : ''} lists the verifier tool "${verifier.tool}"`);
  return { tools, ...(found ? { verifier: found } : {}) };
}

export async function createMcpEpisode(task: McpToolsTask, o: McpOptions, settings: { toolCalls: boolean; horizon?: number }, context: EnvironmentContext): Promise<Environment> {
  const limits: McpLimits = { callTimeoutMs: o.callTimeoutMs, maxResponseBytes: o.maxResponseBytes, episodeEnd: Date.now() + o.episodeTimeoutMs };
  const connections = await openAll(o, context, limits);
  const closeAll = () => Promise.all(connections.map((c) => c.close())).then(() => undefined);
  // The servers are closed at the episode's time limit at the latest, even if the episode is never closed
  // (a runner that gave up while create() was still connecting never receives this environment).
  const backstop = setTimeout(() => void closeAll(), Math.max(0, limits.episodeEnd - Date.now()));
  backstop.unref();
  let offered: Offered;
  let specs: ToolSpec[];
  try {
    offered = offer(o, connections, await Promise.all(connections.map((c) => c.listTools())), task.verifier);
    specs = [...[...offered.tools.values()].map(({ tool }) => ({ name: tool.name, description: tool.description, parameters: parameters(tool.inputSchema) })), ANSWER_SPEC];
    if (JSON.stringify(specs).length > MAX_TOOL_SCHEMA_CHARS) throw new McpFailure(`the MCP servers' tool schemas pass ${MAX_TOOL_SCHEMA_CHARS} characters together; offer fewer with the servers' tools option`);
  } catch (err) {
    clearTimeout(backstop);
    await closeAll();
    throw err;
  }
  const horizon = settings.horizon ?? MCP_DEFAULT_HORIZON;
  let steps = 0;
  let done = true;

  const judge = async (value: unknown): Promise<number> => {
    const v = task.verifier;
    if (v.kind === 'answer') return (typeof value === 'string' || typeof value === 'number') && answerMatches(value, v.answer) ? 1 : 0;
    if (v.kind === 'predicate') return evaluatePredicate(v.predicate, predicateSubject(value)) ? 1 : 0;
    const result = await offered.verifier!.connection.callTool(v.tool, { ...v.arguments, answer: value as never });
    if (result.isError) throw new McpFailure(`the verifier tool "${v.tool}" answered an error`);
    return rewardOf(result, v.tool);
  };

  return {
    horizon,
    systemPrompt: mcpSystemPrompt(o.instructions, specs, settings.toolCalls),
    ...(settings.toolCalls ? { tools: specs } : {}),
    async reset() {
      steps = 0;
      done = false;
      return `Question: ${task.question}\nYou have at most ${horizon} tool calls, the answer included.`;
    },
    async step(action: PolicyReply): Promise<StepResult> {
      if (done) throw new Error('step() after the episode ended; call reset() first');
      steps++;
      const left = horizon - steps;
      const outOfSteps = left <= 0;
      const fail = (error: string, tool?: string): StepResult => {
        done = outOfSteps;
        const observation = `Error: ${error}${outOfSteps ? '\nNo tool calls left; the episode is over.' : `\n(${left} tool call(s) left)`}`;
        return { observation, done: outOfSteps, ...(outOfSteps ? { reward: 0 } : {}), info: { ok: false, error: error.slice(0, 500), ...(tool ? { tool } : {}) } };
      };
      const call = parseToolCall(action);
      if (!call.ok) return fail(call.error);
      const args = call.arguments;
      if (args === null || typeof args !== 'object' || Array.isArray(args)) return fail(`the arguments of ${call.name} must be a JSON object`, call.name);

      if (call.name === ANSWER_TOOL) {
        const value = (args as Record<string, unknown>).value;
        if (value === undefined) return fail('the answer tool takes {"value": ...}', ANSWER_TOOL);
        const text = JSON.stringify(value);
        if (text.length > MAX_ANSWER_CHARS) return fail(`the answer is longer than ${MAX_ANSWER_CHARS} characters of JSON`, ANSWER_TOOL);
        const reward = await judge(value);
        done = true;
        return { observation: `Answer recorded: ${text}.`, done: true, reward, info: { ok: true, tool: ANSWER_TOOL, correct: reward > 0 } };
      }
      const target = offered.tools.get(call.name);
      if (!target) return fail(`unknown tool "${call.name}" (tools: ${[...offered.tools.keys(), ANSWER_TOOL].join(', ')})`, call.name);
      const result = await target.connection.callTool(call.name, args as Record<string, unknown>);
      const cut = result.text.length > o.maxResultChars ? `${result.text.slice(0, o.maxResultChars)}\n[result cut at ${o.maxResultChars} of ${result.text.length} characters]` : result.text;
      if (result.isError) return fail(`${call.name} failed: ${cut}`, call.name);
      const note = call.note ? ` (${call.note})` : '';
      const observation = `Result of ${call.name}${note}: ${cut}`;
      if (outOfSteps) {
        done = true;
        return { observation: `${observation}\nNo tool calls left and no answer given; the episode is over.`, done: true, reward: 0, info: { ok: true, tool: call.name } };
      }
      return { observation: `${observation}\n(${left} tool call(s) left)`, done: false, info: { ok: true, tool: call.name } };
    },
    async close() {
      clearTimeout(backstop);
      await closeAll();
    },
  };
}
