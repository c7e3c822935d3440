/**
 * Tool calls in each family's format: the parser on family-formatted text (Qwen/Hermes `<tool_call>`,
 * Llama 3.1 JSON), all-or-nothing on malformed output; the forced-call pattern matches what the templates
 * write and compiles to the engine's automaton; the streaming hold releases content only when it cannot
 * be part of a call.
 */
import { describe, expect, it } from 'vitest';
import { compileConstraint } from '../../trainer/engine/generation/regex-automaton.ts';
import { parseToolCalls } from '../../trainer/engine/model/tool-call-parser.ts';
import { argumentsPattern, JSON_OBJECT, toolCallPattern } from '../../trainer/engine/model/tool-call-regex.ts';
import { detectToolFormat, pythonJson, templateRendersTools } from '../../trainer/engine/model/tool-format.ts';
import { CHATML_TEMPLATE } from '../../trainer/engine/model/byte-tokenizer.ts';
import { ToolCallHold } from '../../trainer/serving/tool-stream.ts';

const whole = (pattern: string) => new RegExp(`^(?:${pattern})$`, 'u');

describe('tool call parser', () => {
  it('reads Hermes blocks with content around them', () => {
    const text = 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>\n<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>';
    expect(parseToolCalls('hermes', text)).toEqual({
      content: 'Let me look.',
      calls: [
        { name: 'get_weather', arguments: '{"city":"Paris","days":2}' },
        { name: 'now', arguments: '{}' },
      ],
    });
  });

  it('accepts an unclosed last block and arguments given as a JSON string', () => {
    expect(parseToolCalls('hermes', '<tool_call>\n{"name": "f", "arguments": "{\\"x\\": 1}"}')).toEqual({ content: null, calls: [{ name: 'f', arguments: '{"x":1}' }] });
  });

  it('gives null (plain content) when any block does not parse, or there is none', () => {
    expect(parseToolCalls('hermes', 'Just words.')).toBeNull();
    expect(parseToolCalls('hermes', '<tool_call>\n{"name": "f", "arguments": {"x": 1}\n</tool_call>')).toBeNull();
    expect(parseToolCalls('hermes', '<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"arguments": {}}</tool_call>')).toBeNull();
    expect(parseToolCalls('hermes', '<tool_call>{"name": "f", "arguments": [1]}</tool_call>')).toBeNull();
  });

  it('reads a Llama 3.1 JSON call, with or without the python tag, and nothing else', () => {
    expect(parseToolCalls('llama3-json', ' {"name": "get_weather", "parameters": {"city": "Oslo"}}')).toEqual({ content: null, calls: [{ name: 'get_weather', arguments: '{"city":"Oslo"}' }] });
    expect(parseToolCalls('llama3-json', '<|python_tag|>{"name": "f", "parameters": {}}')?.calls).toEqual([{ name: 'f', arguments: '{}' }]);
    expect(parseToolCalls('llama3-json', 'The answer is {"name": "f"}')).toBeNull();
    expect(parseToolCalls('llama3-json', '{"name": "f", "parameters": {"a": }')).toBeNull();
  });
});

describe('tool format from the template', () => {
  it('knows Hermes, Llama and falls back to Hermes for templates without tools', () => {
    expect(detectToolFormat('{{ "<tool_call>" }}')).toBe('hermes');
    expect(detectToolFormat("{{ '<|start_header_id|>' + message['role'] }}")).toBe('llama3-json');
    expect(detectToolFormat(CHATML_TEMPLATE)).toBe('hermes');
    expect(templateRendersTools(CHATML_TEMPLATE)).toBe(false);
    expect(templateRendersTools('{% if tools %}{% endif %}')).toBe(true);
  });

  it('writes JSON as Python json.dumps does', () => {
    expect(pythonJson({ a: 1, b: [1, 'x'], c: { d: null } })).toBe('{"a": 1, "b": [1, "x"], "c": {"d": null}}');
  });
});

const weather = { name: 'get_weather', description: 'Weather.', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
const setUnit = {
  name: 'set_unit',
  description: 'Pick a unit.',
  parameters: { type: 'object', properties: { unit: { enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer' }, fine: { type: 'boolean' } }, required: ['unit', 'days', 'fine'], additionalProperties: false },
};

describe('forced tool call pattern', () => {
  it('matches one call as the templates write it, to an allowed name only', () => {
    const hermes = whole(toolCallPattern('hermes', [weather, setUnit]));
    expect(hermes.test('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "extra": [1, {"a": true}]}}\n</tool_call>')).toBe(true);
    expect(hermes.test('<tool_call>\n{"name": "set_unit", "arguments": {"unit": "celsius", "days": 3, "fine": false}}\n</tool_call>')).toBe(true);
    expect(hermes.test('<tool_call>\n{"name": "set_unit", "arguments": {"unit": "kelvin", "days": 3, "fine": false}}\n</tool_call>')).toBe(false);
    expect(hermes.test('<tool_call>\n{"name": "other", "arguments": {}}\n</tool_call>')).toBe(false);
    const llama = whole(toolCallPattern('llama3-json', [weather]));
    expect(llama.test('{"name": "get_weather", "parameters": {"city": "Oslo"}}')).toBe(true);
    expect(llama.test('{"name": "get_weather", "arguments": {"city": "Oslo"}}')).toBe(false);
  });

  it('everything it matches parses as a call, and it compiles to the engine automaton', () => {
    for (const sample of ['{}', '{"a": 1, "b": [true, null, "x"], "c": {"d": -2.5e3}}', '{"q": "say \\"hi\\""}']) {
      expect(whole(JSON_OBJECT).test(sample)).toBe(true);
      expect(() => JSON.parse(sample)).not.toThrow();
    }
    expect(whole(JSON_OBJECT).test('{"a": }')).toBe(false);
    expect(whole(JSON_OBJECT).test('{"a": "tab\there"}')).toBe(false); // JSON strings hold no raw control characters
    expect(argumentsPattern(setUnit.parameters)).not.toBe(JSON_OBJECT);
    for (const format of ['hermes', 'llama3-json'] as const) {
      expect(compileConstraint({ regex: toolCallPattern(format, [weather, setUnit]) }).finals.size).toBeGreaterThan(0);
    }
  });
});

describe('streaming hold', () => {
  it('Hermes: sends words, holds from a possible <tool_call> on', () => {
    const hold = new ToolCallHold('hermes');
    expect(hold.push('Sure')).toBe('Sure');
    expect(hold.push(', <tool')).toBe(', ');
    expect(hold.push('_call>\n{"name"')).toBe('');
    expect(hold.held).toBe('<tool_call>\n{"name"');
    const words = new ToolCallHold('hermes');
    expect(words.push('a <b')).toBe('a <b');
    expect(words.push(' <to')).toBe(' ');
    expect(words.push('ol> c')).toBe('<tool> c');
  });

  it('Llama: holds a reply that starts like JSON, sends one that does not', () => {
    const json = new ToolCallHold('llama3-json');
    expect(json.push('  {"na')).toBe('');
    expect(json.held).toBe('  {"na');
    const words = new ToolCallHold('llama3-json');
    expect(words.push('Hello')).toBe('Hello');
    expect(words.push(' {x}')).toBe(' {x}');
  });
});
