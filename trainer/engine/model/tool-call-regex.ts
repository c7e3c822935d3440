/**
 * The guided-decoding pattern that forces a tool call (`tool_choice: "required"` or a named function) in
 * the family's format: one call to one of the allowed names, written exactly as the template writes calls.
 * Arguments follow the tool's JSON Schema where it is simple (an object of enum, integer, number, boolean
 * or string properties, all required, nothing else allowed); otherwise any JSON object nested up to two
 * levels. A simple schema's string properties are at most 64 characters; other strings are bounded
 * only by max_tokens.
 */
import type { ToolSpec } from '../../../shared/ports/policy.ts';
import { pythonJson, type ToolFormat } from './tool-format.ts';

const escape = (s: string): string => s.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');

const STRING = '"(?:[^"\\\\\\u0000-\\u001f]|\\\\["\\\\/bfnrt])*"';
/** A string property of a simple schema: at most 64 characters, so a forced call ends within a bounded number of tokens. */
const SHORT_STRING = '"(?:[^"\\\\\\u0000-\\u001f]|\\\\["\\\\/bfnrt]){0,64}"';
const NUMBER = '-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?';
const INTEGER = '-?(?:0|[1-9][0-9]*)';
const BOOLEAN = '(?:true|false)';
const SCALAR = `(?:${STRING}|${NUMBER}|${BOOLEAN}|null)`;

function list(item: string, open: string, close: string): string {
  return `${open}(?:${item}(?:, ?${item})*)?${close}`;
}
const member = (value: string): string => `${STRING}: ?${value}`;
const FLAT = `(?:${SCALAR}|${list(SCALAR, '\\[', '\\]')}|${list(member(SCALAR), '\\{', '\\}')})`;
/** Any JSON object whose values nest at most two levels, one space allowed after `,` and `:`. */
export const JSON_OBJECT = list(member(`(?:${FLAT}|${list(FLAT, '\\[', '\\]')})`), '\\{', '\\}');

function propertyValue(schema: unknown): string | null {
  if (!schema || typeof schema !== 'object') return null;
  const s = schema as Record<string, unknown>;
  if (Array.isArray(s.enum) && s.enum.length > 0) return `(?:${s.enum.map((v) => escape(JSON.stringify(v))).join('|')})`;
  if (s.type === 'integer') return INTEGER;
  if (s.type === 'number') return NUMBER;
  if (s.type === 'boolean') return BOOLEAN;
  if (s.type === 'string') return SHORT_STRING;
  return null;
}

/** The arguments pattern the schema allows, as the template's `tojson` spells it; the generic object when it is not simple. */
export function argumentsPattern(parameters: Record<string, unknown>): string {
  const props = parameters.properties;
  if (parameters.type !== 'object' || parameters.additionalProperties !== false || (props !== undefined && (typeof props !== 'object' || props === null))) return JSON_OBJECT;
  const entries = Object.entries((props ?? {}) as Record<string, unknown>);
  const required = new Set(Array.isArray(parameters.required) ? parameters.required : []);
  const values = entries.map(([name, schema]) => (required.has(name) ? propertyValue(schema) : null));
  if (values.some((v) => v === null)) return JSON_OBJECT;
  return `\\{${entries.map(([name], i) => `${escape(JSON.stringify(name))}: ${values[i]}`).join(', ')}\\}`;
}

/** One call to one of `tools`, in the family's wrapper. */
export function toolCallPattern(format: ToolFormat, tools: ToolSpec[]): string {
  if (tools.length === 0) throw new Error('a forced tool call needs at least one tool');
  const calls = tools.map((t) => {
    const name = escape(pythonJson(t.name));
    const args = argumentsPattern(t.parameters);
    return format === 'hermes' ? `\\{"name": ${name}, "arguments": ${args}\\}` : `\\{"name": ${name}, "parameters": ${args}\\}`;
  });
  const call = calls.length === 1 ? calls[0] : `(?:${calls.join('|')})`;
  return format === 'hermes' ? `<tool_call>\\n${call}\\n</tool_call>` : call;
}
