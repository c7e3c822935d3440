/**
 * What a tools run with MCP servers names: the servers (streamable HTTP by `url`, or a local program over stdio
 * by `command`, embedded runs only), the limits, and the tasks — a question with a verifier. Zod at the boundary,
 * `.strict()` so a misspelt option is an error, not a silent default.
 *
 * MCP is an option of the `tools` environment rather than a kind of its own: it is the same episode (a question,
 * one tool call a turn, results back as tool messages, an `answer` call to finish) with the tools served
 * elsewhere, so the prompt, the call parsing, the chat `tools` form and the horizon rules are shared.
 */
import { z } from 'zod';
import { JsonPredicate } from '../../../shared/json-predicate.ts';

/** A tool name the chat API takes (OpenAI's function names): the model sees the server's names unchanged. */
export const McpToolName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a tool name of 1-64 letters, digits, _ or -');
const ServerName = z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, 'a server name of 1-32 letters, digits, _ or -');
/** Variables a stdio server gets besides the SDK's safe defaults (HOME, PATH, …); esopt's own and AWS's never. */
const EnvName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'an environment variable name')
  .refine((n) => !/^(ESOPT_|AWS_)/i.test(n), 'names starting ESOPT_ or AWS_ hold esopt\'s own secrets: a server never gets them');

export const McpServerOptions = z
  .object({
    /** Names the server in errors and in a verifier's `server`; unique among the servers. */
    name: ServerName.default('mcp'),
    /** A streamable HTTP endpoint: https (http only to this machine, in embedded runs). */
    url: z.url().optional(),
    /** A program speaking MCP over stdio, `[program, ...args]`, started per episode: embedded runs only. */
    command: z.array(z.string().min(1).max(4096)).min(1).max(64).optional(),
    env: z.record(EnvName, z.string().max(4096)).optional(),
    cwd: z.string().min(1).max(4096).optional(),
    /** Offer only these of the server's tools (default: all it lists). */
    tools: z.array(McpToolName).min(1).max(128).optional(),
  })
  .strict()
  .superRefine((s, ctx) => {
    if ((s.url === undefined) === (s.command === undefined)) ctx.addIssue({ code: 'custom', message: 'give exactly one of url (streamable HTTP) or command (stdio)' });
    for (const key of ['env', 'cwd'] as const) {
      if (s[key] !== undefined && s.command === undefined) ctx.addIssue({ code: 'custom', path: [key], message: 'only for a server started by command' });
    }
  });
export type McpServerOptions = z.infer<typeof McpServerOptions>;

/** How a task's final answer is judged: reward 1 or 0 for `answer` and `predicate`, the tool's number for `tool`. */
export const McpVerifier = z.discriminatedUnion('kind', [
  /** The built-in environment's match: numbers within 0.01 (units and signs ignored), strings normalised. */
  z.object({ kind: z.literal('answer'), answer: z.union([z.string().min(1).max(1000), z.number().finite()]) }).strict(),
  /** A tool on the servers, hidden from the model, called with `{...arguments, answer}`; its result is the reward. */
  z.object({ kind: z.literal('tool'), tool: McpToolName, server: ServerName.optional(), arguments: z.record(z.string(), z.json()).optional() }).strict(),
  /** A JSON predicate (shared/json-predicate.ts) over the final answer. */
  z.object({ kind: z.literal('predicate'), predicate: JsonPredicate }).strict(),
]);
export type McpVerifier = z.infer<typeof McpVerifier>;

export const McpToolsTask = z
  .object({
    kind: z.literal('mcp'),
    question: z.string().min(1).max(16_000),
    verifier: McpVerifier,
  })
  .strict();
export type McpToolsTask = z.infer<typeof McpToolsTask>;

export const McpOptions = z
  .object({
    servers: z
      .array(McpServerOptions)
      .min(1)
      .max(8)
      .superRefine((servers, ctx) => {
        const seen = new Set<string>();
        servers.forEach((s, i) => {
          if (seen.has(s.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `another server is named "${s.name}": name each one` });
          seen.add(s.name);
        });
      }),
    /** Text put first in the system prompt: what the tools are for. */
    instructions: z.string().max(8000).optional(),
    /** Tasks that come with the servers, sampled per split by content hash (or push a task suite). */
    tasks: z.array(McpToolsTask).min(1).max(1000).optional(),
    /** One MCP request (connect, tools/list, tools/call), waited for at most this long. */
    callTimeoutMs: z.number().int().min(100).max(600_000).default(30_000),
    /** The whole episode, from its start: no call starts or continues after it. */
    episodeTimeoutMs: z.number().int().min(1_000).max(3_600_000).default(600_000),
    /** The most one HTTP response body or one stdio message may hold. */
    maxResponseBytes: z.number().int().min(1024).max(16_777_216).default(1_048_576),
    /** The most of one tool result the model is shown (longer results are cut, saying so). */
    maxResultChars: z.number().int().min(100).max(200_000).default(8_000),
  })
  .strict();
export type McpOptions = z.infer<typeof McpOptions>;
