/**
 * Reads a tool call out of a policy's reply: the chat API's `tool_calls` when present, otherwise the
 * first JSON object in the text, `{"tool": "<name>", "arguments": {...}}` (code fences and words around
 * it are fine; `"name"` is accepted for `"tool"`). Failures are messages, not exceptions.
 */
import { z } from 'zod';
import type { PolicyReply } from '../../shared/ports/policy.ts';

export type ParsedCall = { ok: true; name: string; arguments: unknown; note?: string } | { ok: false; error: string };

const CallJson = z.union([
  z.object({ tool: z.string().min(1), arguments: z.unknown().optional() }),
  z.object({ name: z.string().min(1), arguments: z.unknown().optional() }),
]);

/** The first balanced {...} in the text (string-aware, so braces inside strings do not count). */
function firstJsonObject(text: string): string | null {
  const start = text.indexOf('{');
  if (start < 0) return null;
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '{') depth++;
    else if (ch === '}' && --depth === 0) return text.slice(start, i + 1);
  }
  return text.slice(start);
}

export function parseToolCall(reply: PolicyReply): ParsedCall {
  if (reply.toolCalls?.length) {
    const [call] = reply.toolCalls;
    if (typeof call.arguments === 'string') return { ok: false, error: `malformed JSON in the arguments of the ${call.name} tool call: ${call.arguments.slice(0, 200)}` };
    const note = reply.toolCalls.length > 1 ? `only the first of ${reply.toolCalls.length} tool calls was run` : undefined;
    return { ok: true, name: call.name, arguments: call.arguments ?? {}, ...(note ? { note } : {}) };
  }
  const candidate = firstJsonObject(reply.text);
  if (candidate === null) return { ok: false, error: 'no tool call found: reply with one JSON object {"tool": "<name>", "arguments": {...}}' };
  let json: unknown;
  try {
    json = JSON.parse(candidate);
  } catch (err) {
    return { ok: false, error: `malformed JSON: ${(err as Error).message}` };
  }
  const call = CallJson.safeParse(json);
  if (!call.success) return { ok: false, error: 'a tool call is a JSON object with "tool" (a string) and "arguments" (an object)' };
  const name = 'tool' in call.data ? call.data.tool : call.data.name;
  return { ok: true, name, arguments: call.data.arguments ?? {} };
}
