/**
 * How a model family writes tool calls, read off its chat template: Qwen/Hermes wrap each call in
 * `<tool_call>{"name": …, "arguments": …}</tool_call>`, Llama 3.x replies with one bare
 * `{"name": …, "parameters": …}` object. Templates that name neither (Gemma 3, ChatML, the built models)
 * get the Hermes format, which chat-tools.ts then writes into the prompt itself.
 */
import type { ToolFormat } from '../engine.ts';

export type { ToolFormat };

export function detectToolFormat(template: string | null): ToolFormat {
  if (template?.includes('<tool_call>')) return 'hermes';
  if (template?.includes('<|start_header_id|>') || template?.includes('<|python_tag|>')) return 'llama3-json';
  return 'hermes';
}

/** Whether the template renders `tools` itself; otherwise chat-tools.ts writes them into the messages. */
export function templateRendersTools(template: string | null): boolean {
  return template !== null && /\btools\b/.test(template);
}

/**
 * JSON as Python's json.dumps writes it (", " and ": " separators), which is how the templates' `tojson`
 * and the models' training data spell tool calls.
 */
export function pythonJson(value: unknown, indent?: number): string {
  if (indent !== undefined) return JSON.stringify(value, null, indent);
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => pythonJson(v)).join(', ')}]`;
  const entries = Object.entries(value).filter(([, v]) => v !== undefined);
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${pythonJson(v)}`).join(', ')}}`;
}
