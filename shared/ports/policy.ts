/**
 * The policy port: something that answers a chat with one message. An in-process ONNX model, the HTTP
 * client of an OpenAI-compatible endpoint and the scripted policies all implement it.
 */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  /** An assistant turn that called tools (the chat API's `tool_calls`). */
  toolCalls?: ToolCall[];
  /** A `tool` turn: the id of the call it answers. */
  toolCallId?: string;
  /**
   * Pictures shown with this turn, as `data:image/png;base64,…` URLs (a web page's screenshot). Only the
   * chat API's `image_url` parts carry them; a policy that cannot see images refuses a chat that has any.
   */
  images?: string[];
}

export interface ToolCall {
  /** The chat API's `call_…` id, when the call came from (or goes to) one. */
  id?: string;
  name: string;
  arguments: unknown;
}

export interface PolicyReply {
  text: string;
  /** Set when the policy answered in the chat API's `tool_calls` form. */
  toolCalls?: ToolCall[];
  /** `cached`: of the prompt tokens, those served from a prefix cache (OpenAI's `cached_tokens`), when told. */
  tokens: { prompt: number; completion: number; cached?: number };
  inferenceMs: number;
}

/** A tool offered in the chat API's `tools` form: a name, what it does, JSON Schema of its arguments. */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/**
 * What an environment may force its action format to: a regular expression (JavaScript syntax, matched
 * against the whole reply) or a list of allowed replies. The trainer's engine decodes only continuations
 * that can still match; other OpenAI-compatible servers receive it as vLLM's `guided_regex` /
 * `guided_choice`. The environment still checks every action itself.
 */
export type ActionConstraint = { regex: string } | { choice: string[] };

export interface PolicyContext {
  /** Index of the turn in the episode, from 0: seeds per-step sampling. */
  step: number;
  signal?: AbortSignal;
  /** Tools the environment accepts as `tool_calls` (an HTTP policy forwards them as `tools`). */
  tools?: ToolSpec[];
  /** The format the environment accepts for this turn's reply, if it constrains it. */
  constraint?: ActionConstraint;
}

export interface Policy {
  act(messages: ChatMessage[], context: PolicyContext): Promise<PolicyReply>;
}
