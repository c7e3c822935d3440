/**
 * Reads a model's tool calls out of its completion in its family's format (tool-format.ts). All or
 * nothing: a completion whose calls do not all parse is plain content (null here), so a half-made call
 * never reaches a client as a tool call.
 */
import type { ToolFormat } from './tool-format.ts';

export interface ParsedToolCall {
  name: string;
  /** The arguments as a JSON object text (OpenAI's `function.arguments`). */
  arguments: string;
}

export interface ParsedCompletion {
  /** Text outside the calls, or null when there is none (OpenAI's content beside tool_calls). */
  content: string | null;
  calls: ParsedToolCall[];
}

/** `{"name": string, <argsKey>: object | JSON object text}` → a call, or null. */
function callFrom(json: string, argsKeys: string[]): ParsedToolCall | null {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return null;
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return null;
  const v = value as Record<string, unknown>;
  if (typeof v.name !== 'string' || v.name.length === 0) return null;
  const key = argsKeys.find((k) => k in v);
  let args: unknown = key === undefined ? {} : v[key];
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      return null;
    }
  }
  if (!args || typeof args !== 'object' || Array.isArray(args)) return null;
  return { name: v.name, arguments: JSON.stringify(args) };
}

const HERMES_BLOCK = /<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g;

function parseHermes(text: string): ParsedCompletion | null {
  if (!text.includes('<tool_call>')) return null;
  const calls: ParsedToolCall[] = [];
  for (const m of text.matchAll(HERMES_BLOCK)) {
    const call = callFrom(m[1].trim(), ['arguments', 'parameters']);
    if (!call) return null;
    calls.push(call);
  }
  const rest = text.replace(HERMES_BLOCK, '').trim();
  return { content: rest === '' ? null : rest, calls };
}

/** Llama 3.1 answers a call with the JSON object alone (after `<|python_tag|>` when it kept it). */
function parseLlamaJson(text: string): ParsedCompletion | null {
  const body = text.trim().replace(/^<\|python_tag\|>/, '').trim();
  if (!body.startsWith('{')) return null;
  const call = callFrom(body, ['parameters', 'arguments']);
  return call ? { content: null, calls: [call] } : null;
}

/** The calls in a completion, or null when it holds none that parse (then it is plain content). */
export function parseToolCalls(format: ToolFormat, text: string): ParsedCompletion | null {
  const parsed = format === 'hermes' ? parseHermes(text) : parseLlamaJson(text);
  return parsed && parsed.calls.length > 0 ? parsed : null;
}
