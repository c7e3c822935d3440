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

export const ChatMessageIn = z.object({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
  content: Content.nullable().default(''),
});

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
}).refine((r) => r.guided_regex == null || r.guided_choice == null, { message: 'give guided_regex or guided_choice, not both', path: ['guided_choice'] });
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>;

/** What the server answers with; declared as schemas so the tests check the wire format field by field. */
export const Usage = z.object({
  prompt_tokens: z.number().int().min(0),
  completion_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0),
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
      message: z.strictObject({ role: z.literal('assistant'), content: z.string(), refusal: z.null() }),
      logprobs: z.null(),
      finish_reason: z.enum(['stop', 'length']),
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
      delta: z.strictObject({ role: z.literal('assistant').optional(), content: z.string().optional() }),
      logprobs: z.null(),
      finish_reason: z.enum(['stop', 'length']).nullable(),
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
