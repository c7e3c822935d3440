/**
 * One OpenEnv episode as an esopt Environment: the model's reply becomes the server's action (a tool call's
 * arguments, a JSON object in the text, or the text in one string field), the server's observation becomes text
 * (a stable rendering: fields in sorted order, strings as they are, everything else compact JSON), and the
 * reward and `done` come from the server. A reply that yields no action, or that the server refuses as invalid,
 * is an error observation that uses up a step (the model's fault, something to learn from); anything wrong with
 * the server ends the episode with a fixed reason.
 */
import type { PolicyReply, ToolSpec } from '../../shared/ports/policy.ts';
import type { Environment, EnvironmentContext, StepResult } from '../environment.ts';
import type { OpenEnvOptions, OpenEnvTask } from './options.ts';
import { ActionRefused, fetchSchema, httpSession, wsSession, type ServerSession, type ServerStep, type SessionLimits } from './session.ts';

/** Marks the action's JSON Schema in the system prompt (the random policy reads it back from there). */
export const SCHEMA_MARKER = 'Action JSON Schema: ';

/** Sorted keys at every depth, so one observation always renders to one text. */
function stable(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stable);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.keys(value).sort().map((k) => [k, stable((value as Record<string, unknown>)[k])]));
  return value;
}

export function renderObservation(observation: Record<string, unknown>, fields: string[] | undefined): string {
  const keys = (fields ?? Object.keys(observation).filter((k) => k !== 'reward' && k !== 'done' && k !== 'metadata').sort()).filter((k) => k in observation);
  const text = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(stable(v)));
  if (keys.length === 1) return text(observation[keys[0]!]);
  return keys.map((k) => `${k}: ${text(observation[k])}`).join('\n');
}

/** OpenEnv's Action base class adds `metadata`; the model has no use for it. */
function actionParameters(schema: Record<string, unknown>): Record<string, unknown> {
  const properties = schema.properties;
  if (properties === null || typeof properties !== 'object' || !('metadata' in properties)) return schema;
  const { metadata: _unused, ...rest } = properties as Record<string, unknown>;
  const required = Array.isArray(schema.required) ? schema.required.filter((r) => r !== 'metadata') : undefined;
  return { ...schema, properties: rest, ...(required ? { required } : {}) };
}

/** The first balanced `{…}` in the text that parses as a JSON object (code fences and words around it are fine). */
export function jsonObjectIn(text: string): Record<string, unknown> | null {
  for (let start = text.indexOf('{'); start !== -1; start = text.indexOf('{', start + 1)) {
    let depth = 0;
    let inString = false;
    for (let i = start; i < text.length; i++) {
      const c = text[i];
      if (inString) {
        if (c === '\\') i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '{') depth++;
      else if (c === '}' && --depth === 0) {
        try {
          const v: unknown = JSON.parse(text.slice(start, i + 1));
          if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
        } catch {
          /* not this one */
        }
        break;
      }
    }
  }
  return null;
}

function actionOf(reply: PolicyReply, o: OpenEnvOptions, toolName: string): Record<string, unknown> | string {
  if (o.action.as === 'text') return { [o.action.field]: reply.text };
  if (o.action.as === 'tool') {
    const call = reply.toolCalls?.find((c) => c.name === toolName) ?? reply.toolCalls?.[0];
    if (call) {
      if (call.arguments === null || typeof call.arguments !== 'object' || Array.isArray(call.arguments)) return `the ${toolName} call's arguments are not a JSON object`;
      return call.arguments as Record<string, unknown>;
    }
  }
  // json, or tool mode with the call written as text.
  const found = jsonObjectIn(reply.text);
  if (!found) return o.action.as === 'tool' ? `no ${toolName} tool call and no JSON object in the reply` : 'no JSON object in the reply';
  // A tool call written out as text: {"name": "act", "arguments": {...}}.
  if (o.action.as === 'tool' && found.arguments !== null && typeof found.arguments === 'object' && (found.name === toolName || found.tool === toolName)) return found.arguments as Record<string, unknown>;
  return found;
}

export async function createOpenEnvEpisode(task: OpenEnvTask, o: OpenEnvOptions, context: EnvironmentContext): Promise<Environment> {
  const base = new URL(o.url);
  const limits: SessionLimits = { callTimeoutMs: o.callTimeoutMs, maxResponseBytes: o.maxResponseBytes, episodeEnd: Date.now() + o.episodeTimeoutMs };
  const key = context.endpointKey;
  const toolName = o.action.as === 'tool' ? o.action.name : 'act';
  const schema = o.action.as === 'text' ? undefined : actionParameters((await fetchSchema(base, context.outbound, key, limits)).action);
  const tools: ToolSpec[] | undefined = schema && o.action.as === 'tool' ? [{ name: toolName, description: o.action.description, parameters: schema }] : undefined;
  const how =
    o.action.as === 'tool'
      ? `Act by calling the ${toolName} tool once per turn; its arguments are the action.`
      : o.action.as === 'json'
        ? 'Act by answering one JSON object per turn: the action, matching the schema below.'
        : 'Your whole reply each turn is the action.';
  const systemPrompt = [o.instructions, how, schema ? `${SCHEMA_MARKER}${JSON.stringify(schema)}` : undefined].filter((s) => s !== undefined).join('\n');

  let session: ServerSession | undefined;
  let steps = 0;
  const observe = (s: ServerStep): StepResult => ({
    observation: renderObservation(s.observation, o.observation.fields),
    done: s.done,
    ...(s.reward !== null ? { reward: s.reward } : {}),
    info: {},
  });
  return {
    horizon: o.horizon,
    systemPrompt,
    ...(tools ? { tools } : {}),
    async reset(seed) {
      session = o.transport === 'ws' ? await wsSession(base, context.outbound, key, limits) : httpSession(base, context.outbound, key, limits);
      // The task's seed is the episode; the runner's seed (sampling) is not sent.
      void seed;
      const first = await session.reset({ ...task.reset, seed: task.seed });
      if (first.done) throw new Error('the server ended the episode at reset (done: true before any action)');
      return renderObservation(first.observation, o.observation.fields);
    },
    async step(reply) {
      if (!session) throw new Error('step() before reset()');
      steps++;
      const action = actionOf(reply, o, toolName);
      if (typeof action === 'string') return { observation: `Error: ${action}. Steps left: ${o.horizon - steps}.`, done: false, info: { error: action } };
      try {
        return observe(await session.step(action));
      } catch (err) {
        if (err instanceof ActionRefused) return { observation: `Error: ${err.message}. Steps left: ${o.horizon - steps}.`, done: false, info: { error: err.message } };
        throw err;
      }
    },
    async close() {
      await session?.close();
    },
  };
}
