/**
 * OpenAI tool calling through the official `openai` client against the real hono server on loopback,
 * with the tiny model given an 8k context (ChatML template, so tools are rendered in the Hermes format). Random
 * weights do not call tools by themselves: `tool_choice` forces the call by guided decoding, which is what
 * is checked here; the parser itself is unit-tested on family-formatted text (test/engine/tool-calls.test.ts).
 */
import { rmSync } from 'node:fs';
import OpenAI from 'openai';
import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../trainer/engine/engine.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { ChatCompletion, ChatCompletionChunk } from '../../trainer/serving/openai-schema.ts';
import { startInferenceServer, type RunningServer } from '../../trainer/serving/server.ts';
import { HttpPolicy } from '../../environments/policies/http-client.ts';
import { runEpisode } from '../../environments/episode-runner.ts';
import { tools } from '../../environments/tools/definition.ts';
import { saveLongContextTiny } from '../training/helpers/long-context-model.ts';

let engine: Engine;
let server: RunningServer;
let client: OpenAI;
let dir: string;

beforeAll(async () => {
  dir = saveLongContextTiny();
  engine = await createEngine({ model: { dir }, mode: 'full' });
  server = await startInferenceServer(engine, {});
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'not-checked', maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await server?.close();
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

const setUnit: ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'set_unit',
    description: 'Pick the temperature unit.',
    parameters: { type: 'object', properties: { unit: { enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer' } }, required: ['unit', 'days'], additionalProperties: false },
  },
};
const now: ChatCompletionTool = { type: 'function', function: { name: 'now', description: 'The time.', parameters: { type: 'object', properties: {}, additionalProperties: false } } };
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris, in celsius?' }];

describe('tool calls through the openai client', () => {
  it('a required call comes back as message.tool_calls with an id and finish_reason tool_calls', async () => {
    const res = await client.chat.completions.create({ model: 'base', messages, tools: [setUnit, now], tool_choice: 'required', temperature: 1, seed: 7, max_tokens: 120 });
    ChatCompletion.parse(res);
    const choice = res.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    const [call] = choice.message.tool_calls!;
    expect(call.id).toMatch(/^call_[0-9a-f]{24}$/);
    expect(call.type).toBe('function');
    if (call.type !== 'function') throw new Error('unreachable');
    expect(['set_unit', 'now']).toContain(call.function.name);
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === 'now') expect(args).toEqual({});
    else {
      expect(['celsius', 'fahrenheit']).toContain(args.unit);
      expect(Number.isInteger(args.days)).toBe(true);
    }
    // The tools are in the prompt: it is longer than the same chat without them.
    expect(res.usage!.prompt_tokens).toBe(engine.encodeChat([{ role: 'user', content: 'Weather in Paris, in celsius?' }], [toSpec(setUnit), toSpec(now)]).length);
    expect(res.usage!.prompt_tokens).toBeGreaterThan(engine.encodeChat([{ role: 'user', content: 'Weather in Paris, in celsius?' }]).length + 300);
  });

  it('streams the same named call as OpenAI tool_call deltas', async () => {
    const body: OpenAI.ChatCompletionCreateParamsNonStreaming = { model: 'base', messages, tools: [setUnit, now], tool_choice: { type: 'function', function: { name: 'set_unit' } }, temperature: 1, seed: 11, max_tokens: 120 };
    const whole = await client.chat.completions.create(body);
    const stream = await client.chat.completions.create({ ...body, stream: true });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    for (const chunk of chunks) ChatCompletionChunk.parse(chunk);
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(deltas[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'set_unit', arguments: '' } });
    expect(deltas[0].id).toMatch(/^call_/);
    const args = deltas.map((d) => d.function?.arguments ?? '').join('');
    const call = whole.choices[0].message.tool_calls![0];
    expect(call.type === 'function' && call.function.name).toBe('set_unit');
    expect(args).toBe(call.type === 'function' ? call.function.arguments : '');
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe('tool_calls');
    expect(chunks.some((c) => c.choices[0]?.delta.content)).toBe(false);
  });

  it('takes the call and its result back (assistant tool_calls, role tool) and calls again', async () => {
    const first = await client.chat.completions.create({ model: 'base', messages, tools: [setUnit], tool_choice: 'required', temperature: 1, seed: 3, max_tokens: 120 });
    const assistant = first.choices[0].message;
    const call = assistant.tool_calls![0];
    const followUp: OpenAI.ChatCompletionMessageParam[] = [...messages, assistant, { role: 'tool', tool_call_id: call.id, content: '{"ok": true}' }];
    const second = await client.chat.completions.create({ model: 'base', messages: followUp, tools: [now], tool_choice: 'required', temperature: 0, max_tokens: 120 });
    expect(second.choices[0].finish_reason).toBe('tool_calls');
    expect(second.choices[0].message.tool_calls![0]).toMatchObject({ type: 'function', function: { name: 'now', arguments: '{}' } });
    // The earlier call and its result are in the prompt, as the template renders them.
    const history = [
      { role: 'user' as const, content: 'Weather in Paris, in celsius?' },
      { role: 'assistant' as const, content: '', toolCalls: [{ id: call.id, name: 'set_unit', arguments: call.type === 'function' ? call.function.arguments : '' }] },
      { role: 'tool' as const, content: '{"ok": true}', toolCallId: call.id },
    ];
    expect(second.usage!.prompt_tokens).toBe(engine.encodeChat(history, [toSpec(now)]).length);
    expect(engine.encodeChat(history, [toSpec(now)]).length).toBeGreaterThan(engine.encodeChat(history.slice(0, 1), [toSpec(now)]).length + first.usage!.completion_tokens);
  });

  it("tool_choice none leaves the tools out and answers in content", async () => {
    const res = await client.chat.completions.create({ model: 'base', messages, tools: [setUnit], tool_choice: 'none', temperature: 0, max_tokens: 4 });
    expect(res.choices[0].message.tool_calls).toBeUndefined();
    expect(typeof res.choices[0].message.content).toBe('string');
    expect(res.usage!.prompt_tokens).toBe(engine.encodeChat([{ role: 'user', content: 'Weather in Paris, in celsius?' }]).length);
  });

  it('rejects bad tool input with 400 and the field path', async () => {
    const bad = async (body: object) => {
      const err = await client.chat.completions.create(body as never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      return (err as InstanceType<typeof OpenAI.BadRequestError>).error as { message: string; param: string };
    };
    expect((await bad({ model: 'base', messages, tools: [setUnit], tool_choice: { type: 'function', function: { name: 'nope' } } })).param).toBe('tool_choice.function.name');
    expect((await bad({ model: 'base', messages: [...messages, { role: 'tool', content: 'x' }] })).param).toBe('messages.1.tool_call_id');
    expect((await bad({ model: 'base', messages, tool_choice: 'required' })).param).toBe('tool_choice');
    expect((await bad({ model: 'base', messages, tools: [{ type: 'function', function: { name: 'has space' } }] })).message).toContain('tools.0.function.name');
  });
});

describe('the tools environment through the server', () => {
  it('an episode with toolCalls: tools go out as `tools`, calls come back as tool_calls and go on as tool turns', async () => {
    const options = { toolCalls: true, horizon: 2 };
    const [{ task }] = tools.sampleTasks('train', 1, 5, tools.optionsSchema.parse(options));
    const sent: unknown[] = [];
    const policy = new HttpPolicy({ baseUrl: `${server.url}/v1`, model: 'base', guidedDecoding: true, temperature: 1, seed: 9, maxTokens: 200 });
    const spy = { act: (m: Parameters<HttpPolicy['act']>[0], c: Parameters<HttpPolicy['act']>[1]) => (sent.push(structuredClone(m)), policy.act(m, c)) };
    const r = await runEpisode({ definition: tools, task, options, policy: spy, seed: 0 });
    expect(r.error).toBeNull();
    expect(r.steps).toBe(2);
    const actions = r.transcript.filter((e) => e.kind === 'action');
    // A forced call that runs past max_tokens (a long free string) comes back as text, which the environment rejects.
    const called = actions.map((a) => (a.kind === 'action' && a.toolCalls?.length ? (a.toolCalls[0] as { id?: string }) : null));
    const observations = r.transcript.filter((e) => e.kind === 'observation' && e.step > 0);
    called.forEach((c, k) => {
      if (c) expect(c.id).toMatch(/^call_/);
      else expect(observations[k].text).toMatch(/^Error: no tool call found/);
    });
    const second = sent[1] as Array<{ role: string; toolCalls?: Array<{ id: string }>; toolCallId?: string }>;
    if (called[0]) {
      // The second prompt carries the first call and its result as the chat API's turns.
      expect(second.at(-2)).toMatchObject({ role: 'assistant', toolCalls: [{ id: called[0].id }] });
      expect(second.at(-1)).toMatchObject({ role: 'tool', toolCallId: called[0].id });
    } else expect(second.at(-1)!.role).toBe('user');
  });
});

function toSpec(t: ChatCompletionTool) {
  if (t.type !== 'function') throw new Error('function tools only');
  return { name: t.function.name, description: t.function.description ?? '', parameters: t.function.parameters ?? {} };
}
