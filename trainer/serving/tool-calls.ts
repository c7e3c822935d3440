/**
 * OpenAI tool calling on the server's side: the request's messages, tools and tool_choice become what the
 * engine renders and how it decodes (a forced call is a guided-decoding pattern, `none` leaves the tools
 * out of the prompt), and a completion becomes `message.tool_calls` when it holds calls in the model's
 * format (trainer/engine/model/tool-call-parser.ts), plain content otherwise.
 */
import { randomUUID } from 'node:crypto';
import type { ActionConstraint, ChatMessage, ToolSpec } from '../../shared/ports/policy.ts';
import { parseToolCalls } from '../engine/model/tool-call-parser.ts';
import { toolCallPattern } from '../engine/model/tool-call-regex.ts';
import type { ToolFormat } from '../engine/model/tool-format.ts';
import type { ChatCompletionRequest, ToolCallOut } from './openai-schema.ts';
import { z } from 'zod';

export interface ToolPlan {
  /** Rendered with the messages; absent for no tools or `tool_choice: "none"`. */
  tools?: ToolSpec[];
  /** Completions are read for calls. */
  parse: boolean;
  /** Forces one call (`required` or a named function). */
  constraint?: ActionConstraint;
}

export function toChatMessages(req: ChatCompletionRequest): ChatMessage[] {
  return req.messages.map((m) => ({
    role: m.role === 'developer' ? 'system' : m.role,
    content: m.content ?? '',
    ...(m.tool_calls ? { toolCalls: m.tool_calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) } : {}),
    ...(m.tool_call_id !== undefined && m.role === 'tool' ? { toolCallId: m.tool_call_id } : {}),
  }));
}

export function planTools(req: ChatCompletionRequest, format: ToolFormat): ToolPlan {
  const choice = req.tool_choice ?? 'auto';
  if (!req.tools?.length || choice === 'none') return { parse: false };
  const tools: ToolSpec[] = req.tools.map((t) => ({ name: t.function.name, description: t.function.description, parameters: t.function.parameters }));
  if (choice === 'auto') return { tools, parse: true };
  const allowed = choice === 'required' ? tools : tools.filter((t) => t.name === choice.function.name);
  return { tools, parse: true, constraint: { regex: toolCallPattern(format, allowed) } };
}

export function newCallId(): string {
  return `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
}

export interface ToolReply {
  content: string | null;
  toolCalls: Array<z.infer<typeof ToolCallOut>>;
}

/** The calls in a completion with fresh ids, or null when it is plain content. */
export function readToolCalls(format: ToolFormat, text: string): ToolReply | null {
  const parsed = parseToolCalls(format, text);
  if (!parsed) return null;
  return { content: parsed.content, toolCalls: parsed.calls.map((c) => ({ id: newCallId(), type: 'function', function: { name: c.name, arguments: c.arguments } })) };
}
