/**
 * What an `openenv` run names: the task (`{ seed, reset? }`, the server's reset kwargs) and the options (the
 * server, the transport, how replies become actions and observations become text, the limits). Zod at the
 * boundary; `.strict()` so a misspelt option is an error, not a silent default.
 */
import { z } from 'zod';

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

