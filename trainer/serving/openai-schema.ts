/**
 * The subset of OpenAI's chat-completions request that the trainer serves, as a zod schema. Unknown
 * fields are accepted and ignored (clients send `user`, `logprobs: false`, penalties at their defaults…),
 * so any OpenAI-compatible client works unchanged; fields we cannot honour are rejected, not ignored.
 */
import { z } from 'zod';

/** OpenAI allows content as a string or an array of parts; we accept text parts only. */
const Content = z.union([
  z.string(),
  z.array(z.object({ type: z.literal('text'), text: z.string() })).transform((parts) => parts.map((p) => p.text).join('')),
]);

/** An assistant's earlier call, as the client sends it back: arguments are a JSON text. */
export const ToolCallIn = z.object({
  id: z.string().min(1).max(200),
  type: z.literal('function').default('function'),
  function: z.object({ name: z.string().min(1).max(64), arguments: z.string().max(100_000).default('{}') }),
});

export const ChatMessageIn = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
    content: Content.nullable().default(''),
    tool_calls: z.array(ToolCallIn).min(1).max(64).nullable().optional(),
    tool_call_id: z.string().min(1).max(200).optional(),
  })
  .refine((m) => m.tool_calls == null || m.role === 'assistant', { message: 'only assistant messages carry tool_calls', path: ['tool_calls'] })
  .refine((m) => m.role !== 'tool' || m.tool_call_id !== undefined, { message: 'a tool message needs the tool_call_id it answers', path: ['tool_call_id'] });

/** A function the model may call: OpenAI's `{type: "function", function: {name, description, parameters}}`. */
export const ToolIn = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a function name is 1–64 letters, digits, _ or -'),
    description: z.string().max(10_000).default(''),
    parameters: z.record(z.string(), z.unknown()).default({ type: 'object', properties: {} }),
    strict: z.boolean().nullable().optional(),
  }),
});

export const ToolChoice = z.union([z.enum(['auto', 'none', 'required']), z.object({ type: z.literal('function'), function: z.object({ name: z.string().min(1) }) })]);
export type ToolChoice = z.infer<typeof ToolChoice>;

export const ChatCompletionRequest = z.looseObject({
  model: z.string().min(1).max(200),
  messages: z.array(ChatMessageIn).min(1),
  temperature: z.number().min(0).max(2).default(1),
  top_p: z.number().gt(0).max(1).default(1),
  /** Not in OpenAI's API but common in compatible servers (vLLM); 0 disables. */
  top_k: z.number().int().min(0).default(0),
  max_tokens: z.number().int().min(1).max(32_768).nullable().optional(),
  max_completion_tokens: z.number().int().min(1).max(32_768).nullable().optional(),
  stop: z.union([z.string().min(1), z.array(z.string().min(1)).max(4)]).nullable().optional(),
  seed: z.number().int().min(0).max(0xffffffff).nullable().optional(),
  stream: z.boolean().nullable().default(false),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullable().optional(),
  n: z.literal(1).nullable().optional(),
  /** vLLM's guided decoding: the completion must match this regular expression (JavaScript syntax) as a whole. */
  guided_regex: z.string().min(1).max(4000).nullable().optional(),
  /** vLLM's guided decoding: the completion must be exactly one of these. */
  guided_choice: z.array(z.string().min(1).max(1000)).min(1).max(1000).nullable().optional(),
  /** Rendered through the model's chat template; its calls come back as `message.tool_calls`. */
  tools: z.array(ToolIn).min(1).max(128).nullable().optional(),
  /** `auto` (default with tools), `none`, `required` or a named function; the last two force a call by guided decoding. */
  tool_choice: ToolChoice.nullable().optional(),
  /** Accepted; a forced call is one call, an unforced reply may hold several. */
  parallel_tool_calls: z.boolean().nullable().optional(),
})
  .refine((r) => r.guided_regex == null || r.guided_choice == null, { message: 'give guided_regex or guided_choice, not both', path: ['guided_choice'] })
  .refine((r) => !forcesCall(r.tool_choice) || (r.tools?.length ?? 0) > 0, { message: 'tool_choice that forces a call needs tools', path: ['tool_choice'] })
  .refine((r) => { const c = r.tool_choice; return typeof c !== 'object' || c === null || (r.tools ?? []).some((t) => t.function.name === c.function.name); }, {
    message: 'tool_choice names a function that is not in tools',
    path: ['tool_choice', 'function', 'name'],
  })
  .refine((r) => !forcesCall(r.tool_choice) || (r.guided_regex == null && r.guided_choice == null), { message: 'a forced tool call is guided decoding already: drop guided_regex / guided_choice', path: ['tool_choice'] });
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>;

/** `required` and a named function force a call; `auto`, `none` and no choice do not. */
export function forcesCall(choice: ToolChoice | null | undefined): boolean {
  return choice === 'required' || (typeof choice === 'object' && choice !== null);
}

export const ToolCallOut = z.strictObject({
  id: z.string().startsWith('call_'),
  type: z.literal('function'),
  function: z.strictObject({ name: z.string(), arguments: z.string() }),
});

/** A piece of a streamed call: the first for a call has id, type and name; arguments may come in parts. */
export const ToolCallDelta = z.strictObject({
  index: z.number().int().min(0),
  id: z.string().startsWith('call_').optional(),
  type: z.literal('function').optional(),
  function: z.strictObject({ name: z.string().optional(), arguments: z.string().optional() }),
});

const FinishReason = z.enum(['stop', 'length', 'tool_calls']);

/** What the server answers with; declared as schemas so the tests check the wire format field by field. */
export const Usage = z.object({
  prompt_tokens: z.number().int().min(0),
  completion_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0),
  /** Of the prompt tokens, those whose keys and values came from the prefix cache. */
  prompt_tokens_details: z.strictObject({ cached_tokens: z.number().int().min(0) }),
});

export const ChatCompletion = z.strictObject({
  id: z.string().startsWith('chatcmpl-'),
  object: z.literal('chat.completion'),
  created: z.number().int(),
  model: z.string(),
  system_fingerprint: z.string(),
  choices: z.array(
    z.strictObject({
      index: z.number().int(),
      message: z.strictObject({ role: z.literal('assistant'), content: z.string().nullable(), refusal: z.null(), tool_calls: z.array(ToolCallOut).min(1).optional() }),
      logprobs: z.null(),
      finish_reason: FinishReason,
    }),
  ),
  usage: Usage,
});
export type ChatCompletion = z.infer<typeof ChatCompletion>;

export const ChatCompletionChunk = z.strictObject({
  id: z.string().startsWith('chatcmpl-'),
  object: z.literal('chat.completion.chunk'),
  created: z.number().int(),
  model: z.string(),
  system_fingerprint: z.string(),
  choices: z.array(
    z.strictObject({
      index: z.number().int(),
      delta: z.strictObject({ role: z.literal('assistant').optional(), content: z.string().optional(), tool_calls: z.array(ToolCallDelta).optional() }),
      logprobs: z.null(),
      finish_reason: FinishReason.nullable(),
    }),
  ),
  usage: Usage.nullable().optional(),
});
export type ChatCompletionChunk = z.infer<typeof ChatCompletionChunk>;

/** OpenAI's error envelope. */
export const ErrorBody = z.object({
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }),
});
export type ErrorBody = z.infer<typeof ErrorBody>;
