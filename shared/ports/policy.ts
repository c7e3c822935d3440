/**
 * The policy port: something that answers a chat with one message. An in-process ONNX model, the HTTP
 * client of an OpenAI-compatible endpoint and the scripted policies all implement it.
 */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
}

export interface ToolCall {
  name: string;
  arguments: unknown;
}

export interface PolicyReply {
  text: string;
  /** Set when the policy answered in the chat API's `tool_calls` form. */
  toolCalls?: ToolCall[];
  tokens: { prompt: number; completion: number };
  inferenceMs: number;
}

/** A tool offered in the chat API's `tools` form: a name, what it does, JSON Schema of its arguments. */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface PolicyContext {
  /** Index of the turn in the episode, from 0: seeds per-step sampling. */
  step: number;
  signal?: AbortSignal;
  /** Tools the environment accepts as `tool_calls` (an HTTP policy forwards them as `tools`). */
  tools?: ToolSpec[];
}

export interface Policy {
  act(messages: ChatMessage[], context: PolicyContext): Promise<PolicyReply>;
}
