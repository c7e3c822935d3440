/**
 * `openenv`: any server speaking OpenEnv's protocol (meta-pytorch/OpenEnv: `/reset`, `/step`, `/schema`, the `/ws`
 * session) is an environment, in any language, unchanged. environment.ts maps replies to actions and
 * observations to text; session.ts is the bounded wire. Tasks are `{ seed, reset? }` (the reset's kwargs),
 * sampled per split like every environment, or from a task suite.
 *
 * The server is opaque, so there is no oracle (it throws, saying so); the random policy plays random actions
 * drawn from the action schema the system prompt carries.
 */
import type { ChatMessage, Policy, PolicyReply } from '../../shared/ports/policy.ts';
import { DEPLOYED_CONTEXT, type EnvironmentDefinition } from '../environment.ts';
import { SeededRandom, deriveSeed } from '../random.ts';
import { sampleSplit } from '../task-sampler.ts';
import { createOpenEnvEpisode, SCHEMA_MARKER } from './environment.ts';
import { OpenEnvOptions, OpenEnvTask } from './options.ts';

export { OpenEnvOptions, OpenEnvTask } from './options.ts';

/** The deepest a random action goes: a server's schema may nest without end (or refer to itself through anyOf). */
const MAX_RANDOM_DEPTH = 6;

const finiteOr = (v: unknown, fallback: number): number => (typeof v === 'number' && Number.isFinite(v) ? v : fallback);

/**
 * A random value of a (simple) JSON Schema: enums, strings, numbers, integers, booleans, objects, arrays. Total:
 * the schema is the server's, so any JSON at all (an empty or inverted range, an empty enum, nesting without
 * end) gives some value, never a throw.
 */
export function randomOf(schema: unknown, random: SeededRandom, depth = 0): unknown {
  const s = schema !== null && typeof schema === 'object' && !Array.isArray(schema) ? (schema as Record<string, unknown>) : {};
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[random.int(Math.min(s.enum.length, 2 ** 32))];
  if ('const' in s) return s.const;
  if (depth >= MAX_RANDOM_DEPTH) return null;
  if (Array.isArray(s.anyOf) && s.anyOf.length > 0) return randomOf(s.anyOf[random.int(Math.min(s.anyOf.length, 2 ** 32))], random, depth + 1);
  const lo = finiteOr(s.minimum, 0);
  const hi = Math.max(lo, finiteOr(s.maximum, lo + 100));
  switch (s.type) {
    case 'integer': {
      const first = Math.ceil(lo);
      const span = Math.min(Math.floor(hi) - first + 1, 2 ** 32);
      return span >= 1 ? first + random.int(Math.floor(span)) : first;
    }
    case 'number': {
      const x = lo + random.float() * (hi - lo);
      return Number.isFinite(x) ? x : lo;
    }
    case 'boolean':
      return random.int(2) === 1;
    case 'array':
      return Array.from({ length: random.int(3) }, () => randomOf(s.items, random, depth + 1));
    case 'object': {
      const props = s.properties !== null && typeof s.properties === 'object' && !Array.isArray(s.properties) ? (s.properties as Record<string, unknown>) : {};
      return Object.fromEntries(Object.entries(props).slice(0, 64).map(([k, v]) => [k, randomOf(v, random, depth + 1)]));
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
