/**
 * `openenv`: any server speaking OpenEnv's protocol (meta-pytorch/OpenEnv: `/reset`, `/step`, `/schema`, the `/ws`
 * session) is an environment, in any language, unchanged. environment.ts maps replies to actions and
 * observations to text; session.ts is the bounded wire. Tasks are `{ seed, reset? }` (the reset's kwargs),
 * sampled per split like every environment, or from a task suite.
 *
 * The server is opaque, so there is no oracle (it throws, saying so); the random policy plays random actions
 * drawn from the action schema the system prompt carries.
 */
import { z } from 'zod';
import type { ChatMessage, Policy, PolicyReply } from '../../shared/ports/policy.ts';
import { DEPLOYED_CONTEXT, type EnvironmentDefinition } from '../environment.ts';
import { SeededRandom, deriveSeed } from '../random.ts';
import { sampleSplit } from '../task-sampler.ts';
import { createOpenEnvEpisode, SCHEMA_MARKER } from './environment.ts';

export const OpenEnvTask = z
  .object({
    seed: z.number().int().min(0).max(2 ** 31 - 1),
    /** Further kwargs for the server's reset (OpenEnv passes those its reset() accepts). */
    reset: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export type OpenEnvTask = z.infer<typeof OpenEnvTask>;

const ActionMapping = z.discriminatedUnion('as', [
  /** The action schema is a chat tool; the call's arguments are the action. */
  z.object({ as: z.literal('tool'), name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/).default('act'), description: z.string().max(1000).default('Take one action in the environment.') }).strict(),
  /** The reply holds one JSON object, the action. */
  z.object({ as: z.literal('json') }).strict(),
  /** The whole reply text goes into one string field of the action. */
  z.object({ as: z.literal('text'), field: z.string().min(1).max(128) }).strict(),
]);

export const OpenEnvOptions = z
  .object({
    /** The server's base URL: https (http only to this machine, in embedded runs). */
    url: z.url(),
    /** `ws`: one OpenEnv /ws session per episode (concurrent episodes stay apart); `http`: stateless /reset, /step. */
    transport: z.enum(['ws', 'http']).default('ws'),
    horizon: z.number().int().min(1).max(1000).default(20),
    action: ActionMapping.default({ as: 'tool', name: 'act', description: 'Take one action in the environment.' }),
    /** Which observation fields the model sees (default: all but reward, done, metadata). */
    observation: z.object({ fields: z.array(z.string().min(1)).min(1).max(64).optional() }).strict().default({}),
    /** Text put first in the system prompt: what the environment is about. */
    instructions: z.string().max(8000).optional(),
    callTimeoutMs: z.number().int().min(100).max(600_000).default(30_000),
    episodeTimeoutMs: z.number().int().min(1_000).max(3_600_000).default(600_000),
    maxResponseBytes: z.number().int().min(256).max(16_777_216).default(1_048_576),
  })
  .strict();
export type OpenEnvOptions = z.infer<typeof OpenEnvOptions>;

/** A random value of a (simple) JSON Schema: enums, strings, numbers, integers, booleans, objects, arrays. */
function randomOf(schema: unknown, random: SeededRandom, depth = 0): unknown {
  const s = (schema ?? {}) as Record<string, unknown>;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[random.int(s.enum.length)];
  if ('const' in s) return s.const;
  if (Array.isArray(s.anyOf) && s.anyOf.length > 0) return randomOf(s.anyOf[random.int(s.anyOf.length)], random, depth + 1);
  const lo = typeof s.minimum === 'number' ? s.minimum : 0;
  const hi = typeof s.maximum === 'number' ? s.maximum : lo + 100;
  switch (s.type) {
    case 'integer':
      return Math.ceil(lo) + random.int(Math.floor(hi) - Math.ceil(lo) + 1);
    case 'number':
      return lo + random.float() * (hi - lo);
    case 'boolean':
      return random.int(2) === 1;
    case 'array':
      return depth > 4 ? [] : Array.from({ length: random.int(3) }, () => randomOf(s.items, random, depth + 1));
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, unknown>;
      return depth > 4 ? {} : Object.fromEntries(Object.entries(props).map(([k, v]) => [k, randomOf(v, random, depth + 1)]));
    }
    default:
      return ['yes', 'no', 'go', 'stop', 'left', 'right'][random.int(6)];
  }
}

function schemaIn(messages: ChatMessage[]): unknown {
  const line = messages[0]?.content.split('\n').find((l) => l.startsWith(SCHEMA_MARKER));
  return line ? JSON.parse(line.slice(SCHEMA_MARKER.length)) : undefined;
}

const NO_ORACLE = 'an openenv server is opaque: esopt cannot know its solution, so there is no oracle policy (use random, replay:FILE or a model)';

export const openenv: EnvironmentDefinition<OpenEnvTask, OpenEnvOptions> = {
  name: 'openenv',
  taskSchema: OpenEnvTask,
  optionsSchema: OpenEnvOptions,
  create(task, options, context = DEPLOYED_CONTEXT) {
    return createOpenEnvEpisode(task, options, context);
  },
  sampleTasks(split, n, seed) {
    return sampleSplit({ idPrefix: 'openenv', generate: (random) => ({ seed: random.int(2 ** 31) }) }, split, n, seed);
  },
  oracle() {
    throw new Error(NO_ORACLE);
  },
  random(_task, options, seed): Policy {
    return {
      async act(messages, { step, tools }): Promise<PolicyReply> {
        const random = new SeededRandom(deriveSeed(seed, step));
        const none = { tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 };
        if (options.action.as === 'text') return { text: String(randomOf({ type: 'string' }, random)), ...none };
        const action = randomOf(tools?.[0]?.parameters ?? schemaIn(messages), random);
        if (options.action.as === 'tool') return { text: '', toolCalls: [{ name: options.action.name, arguments: action }], ...none };
        return { text: JSON.stringify(action), ...none };
      },
    };
  },
};
