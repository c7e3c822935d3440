/**
 * What a chat template is given for a conversation with tools. A template that renders tools itself
 * (Qwen3, Llama 3.1) gets them as Hugging Face passes them: `tools` in OpenAI's `{type, function}` shape,
 * assistant `tool_calls` with object arguments, `tool` turns with `tool_call_id`. A template that does not
 * (Llama 3, Gemma 3, ChatML) gets plain messages with the family's conventions written in: Hermes' tool
 * list in the system turn, `<tool_call>` blocks and `<tool_response>` user turns; or Llama 3.1's JSON
 * instructions in the first user turn, bare JSON calls and `ipython` turns.
 */
import type { ChatMessage, ToolCall, ToolSpec } from '../../../shared/ports/policy.ts';
import { pythonJson, type ToolFormat } from './tool-format.ts';

export interface TemplateInputs {
  messages: Array<Record<string, unknown>>;
  tools?: Array<Record<string, unknown>>;
}

const openAiTool = (t: ToolSpec) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } });

/** Arguments as an object, which every template's `tojson` expects (a JSON text is parsed; anything else is kept). */
function argumentsObject(args: unknown): unknown {
  if (typeof args !== 'string') return args ?? {};
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

function nativeInputs(messages: ChatMessage[], tools: ToolSpec[] | undefined): TemplateInputs {
  return {
    messages: messages.map((m) => ({
      role: m.role,
      content: m.content,
      ...(m.toolCalls?.length
        ? { tool_calls: m.toolCalls.map((c) => ({ ...(c.id ? { id: c.id } : {}), type: 'function', function: { name: c.name, arguments: argumentsObject(c.arguments) } })) }
        : {}),
      ...(m.toolCallId ? { tool_call_id: m.toolCallId } : {}),
    })),
    ...(tools?.length ? { tools: tools.map(openAiTool) } : {}),
  };
}

const HERMES_TOOLS_HEAD = '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>';
const HERMES_TOOLS_TAIL =
  '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>';

const hermesCall = (c: ToolCall): string => `<tool_call>\n{"name": ${pythonJson(c.name)}, "arguments": ${pythonJson(argumentsObject(c.arguments))}}\n</tool_call>`;

/** Qwen's wording, so a model tuned on it is prompted as it was trained. */
function hermesInputs(messages: ChatMessage[], tools: ToolSpec[] | undefined): TemplateInputs {
  const out: Array<{ role: string; content: string }> = [];
  if (tools?.length) {
    const list = HERMES_TOOLS_HEAD + tools.map((t) => `\n${pythonJson(openAiTool(t))}`).join('') + HERMES_TOOLS_TAIL;
    const first = messages[0]?.role === 'system' ? messages[0].content : null;
    out.push({ role: 'system', content: first === null ? list : `${first}\n\n${list}` });
    if (first !== null) messages = messages.slice(1);
  }
  for (const m of messages) {
    if (m.role === 'tool') {
      const response = `<tool_response>\n${m.content}\n</tool_response>`;
      const last = out.at(-1);
      // Consecutive results are one user turn, as Qwen renders them (and Gemma's alternation needs).
      if (last?.role === 'user' && last.content.endsWith('</tool_response>')) last.content += `\n${response}`;
      else out.push({ role: 'user', content: response });
    } else if (m.role === 'assistant' && m.toolCalls?.length) {
      out.push({ role: 'assistant', content: [m.content, ...m.toolCalls.map(hermesCall)].filter((s) => s !== '').join('\n') });
    } else out.push({ role: m.role, content: m.content });
  }
  return { messages: out };
}

const LLAMA_TOOLS_HEAD =
  'Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n' +
  'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n';

/** Llama 3.1's tools-in-user-message convention, spelled as its template spells it. */
function llamaInputs(messages: ChatMessage[], tools: ToolSpec[] | undefined): TemplateInputs {
  const out: Array<{ role: string; content: string }> = [];
  let toolsPending = Boolean(tools?.length);
  for (const m of messages) {
    if (m.role === 'user' && toolsPending) {
      const list = tools!.map((t) => `${pythonJson(openAiTool(t), 4)}\n\n`).join('');
      out.push({ role: 'user', content: `${LLAMA_TOOLS_HEAD}${list}${m.content}` });
      toolsPending = false;
    } else if (m.role === 'tool') out.push({ role: 'ipython', content: m.content });
    else if (m.role === 'assistant' && m.toolCalls?.length) {
      const c = m.toolCalls[0];
      out.push({ role: 'assistant', content: `{"name": ${pythonJson(c.name)}, "parameters": ${pythonJson(argumentsObject(c.arguments))}}` });
    } else out.push({ role: m.role, content: m.content });
  }
  return { messages: out };
}

export function templateInputs(format: ToolFormat, native: boolean, messages: ChatMessage[], tools: ToolSpec[] | undefined): TemplateInputs {
  if (native) return nativeInputs(messages, tools);
  return format === 'hermes' ? hermesInputs(messages, tools) : llamaInputs(messages, tools);
}
