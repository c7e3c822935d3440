import { describe, expect, it } from 'vitest';
import { runEpisode } from '../../environments/episode-runner.ts';
import type { Environment } from '../../environments/environment.ts';
import { scriptedPolicy } from '../../environments/policies/scripted.ts';
import { answerMatches } from '../../environments/tools/answer.ts';
import { generateDatabase } from '../../environments/tools/database.ts';
import { addDays, daysBetween, parseDate } from '../../environments/tools/dates.ts';
import { tools } from '../../environments/tools/definition.ts';
import { solveToolsTask, TASK_KINDS, ToolsOptions, ToolsTask } from '../../environments/tools/task.ts';
import { parseToolCall } from '../../environments/tools/tool-call.ts';
import { findTool } from '../../environments/tools/tools.ts';
import { convertUnits } from '../../environments/tools/units.ts';
import type { PolicyReply, ToolCall } from '../../shared/ports/policy.ts';

const reply = (text: string, toolCalls?: ToolCall[]): PolicyReply => ({ text, ...(toolCalls ? { toolCalls } : {}), tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 });
const options = ToolsOptions.parse({});
const DB = 12345;
const db = generateDatabase(DB);
const alice = db.people[0];
const first = alice.name.split(' ')[0];
const TASK: ToolsTask = { kind: 'order-cost', db: DB, person: first, currency: 'EUR' };

async function episode(task: ToolsTask = TASK): Promise<Environment> {
  const env = await tools.create(ToolsTask.parse(task), options);
  await env.reset(0);
  return env;
}

describe('tools', () => {
  it('the synthetic database is a pure function of its seed', () => {
    expect(generateDatabase(DB)).toEqual(db);
    expect(generateDatabase(DB + 1)).not.toEqual(db);
    expect(new Set(db.people.map((p) => p.name.split(' ')[0])).size).toBe(db.people.length);
    for (const p of db.people) expect(db.orders.filter((o) => o.personId === p.id).length).toBeGreaterThanOrEqual(2);
  });

  it('look-ups, prices in currencies, units and dates compute what they should', () => {
    const found = findTool('find_person')!.execute({ name: first.toUpperCase() }, db);
    expect(found).toEqual({ ok: true, result: alice });
    const product = db.products[0];
    expect(findTool('get_product')!.execute({ product: product.name, currency: 'JPY' }, db)).toEqual({
      ok: true,
      result: { product: product.name, unitPrice: Math.round(product.priceCentsUsd * 150) / 100, currency: 'JPY', weightKg: product.weightKg },
    });
    expect(convertUnits(1, 'kg', 'lb')).toBeCloseTo(2.2046226218, 9);
    expect(convertUnits(100, 'celsius', 'F')).toBeCloseTo(212, 9);
    expect(convertUnits(1, 'mi', 'km')).toBeCloseTo(1.609344, 12);
    expect(() => convertUnits(1, 'kg', 'm')).toThrow(/cannot convert mass \(kg\) to length \(m\)/);
    expect(addDays('2024-02-28', 1)).toBe('2024-02-29');
    expect(addDays('2023-02-28', 1)).toBe('2023-03-01');
    expect(daysBetween('2024-01-01', '2025-01-01')).toBe(366);
    expect(() => parseDate('2023-02-29')).toThrow(/not a calendar date/);
  });

  it('every kind of task has a reference solution of 2-5 tool calls before the answer', () => {
    const seen = new Set<string>();
    for (const sampled of tools.sampleTasks('train', 60, 3, options)) {
      const task = ToolsTask.parse(sampled.task);
      const { calls, answer } = solveToolsTask(task);
      seen.add(task.kind);
      expect(calls.at(-1)).toEqual({ tool: 'answer', arguments: { value: answer } });
      expect(calls.length - 1).toBeGreaterThanOrEqual(2);
      expect(calls.length - 1).toBeLessThanOrEqual(5);
    }
    expect([...seen].sort()).toEqual([...TASK_KINDS].sort());
  });

  it('the answer of a task is what the raw data says (checked without the tools)', () => {
    const orders = db.orders.filter((o) => o.personId === alice.id);
    const last = orders.at(-1)!;
    const cents = db.products.find((p) => p.name === last.product)!.priceCentsUsd;
    expect(solveToolsTask(TASK).answer).toBeCloseTo(last.quantity * (Math.round(cents * 0.9) / 100), 9);
    const days = (Date.parse(last.date) - Date.parse(orders[0].date)) / 86_400_000;
    expect(solveToolsTask({ kind: 'days-between-orders', db: DB, person: first }).answer).toBe(days);
  });

  it('the oracle earns reward 1 on every sampled task of both splits', async () => {
    for (const split of ['train', 'eval'] as const) {
      for (const { task } of tools.sampleTasks(split, 25, 9, options)) {
        const r = await runEpisode({ definition: tools, task, policy: tools.oracle(task, options), seed: 0 });
        expect(r).toMatchObject({ reward: 1, error: null, stopReason: 'done', steps: solveToolsTask(ToolsTask.parse(task)).calls.length });
      }
    }
  });

  it('the random policy earns about 0', async () => {
    let total = 0;
    const tasks = tools.sampleTasks('eval', 20, 4, options);
    for (const [k, { task }] of tasks.entries()) total += (await runEpisode({ definition: tools, task, policy: tools.random(task, options, k), seed: k })).reward;
    expect(total / tasks.length).toBeLessThan(0.1);
  });

  it('accepts the chat API tool_calls form as well as JSON text', async () => {
    const plan = solveToolsTask(TASK).calls;
    const env = await episode();
    const viaToolCalls = await env.step(reply('', [{ name: plan[0].tool, arguments: plan[0].arguments }]));
    expect(viaToolCalls).toMatchObject({ done: false, info: { ok: true, tool: 'find_person' } });
    expect(viaToolCalls.observation).toContain(JSON.stringify(alice));
    const viaText = await env.step(reply(`Sure! \`\`\`json\n${JSON.stringify(plan[1])}\n\`\`\``));
    expect(viaText).toMatchObject({ done: false, info: { ok: true, tool: 'list_orders' } });
    expect(parseToolCall(reply('{"name": "calculator", "arguments": {"expression": "1+1"}}'))).toMatchObject({ ok: true, name: 'calculator' });
    expect(parseToolCall(reply('', [{ name: 'a', arguments: {} }, { name: 'b', arguments: {} }]))).toMatchObject({ ok: true, name: 'a', note: expect.stringMatching(/first of 2/) });
  });

  it.each([
    ['no JSON at all', reply('I would look up the person first.'), /no tool call found/],
    ['malformed JSON', reply('{"tool": "find_person", "arguments": {"name": }'), /malformed JSON/],
    ['truncated JSON', reply('{"tool": "find_person", "arguments": {"name": "A'), /malformed JSON/],
    ['JSON without "tool"', reply('{"arguments": {}}'), /"tool" \(a string\) and "arguments"/],
    ['an unknown tool', reply('{"tool": "web_search", "arguments": {"q": "x"}}'), /unknown tool "web_search"/],
    ['arguments failing the schema', reply('{"tool": "find_person", "arguments": {"name": 7}}'), /invalid arguments for find_person[\s\S]*name/],
    ['an unexpected argument', reply('{"tool": "calculator", "arguments": {"expression": "1", "x": 1}}'), /invalid arguments for calculator/],
    ['a look-up that finds nothing', reply('{"tool": "find_person", "arguments": {"name": "Zelda"}}'), /find_person failed: no person named "Zelda"/],
    ['an unknown id', reply('{"tool": "list_orders", "arguments": {"personId": "P99"}}'), /no person with id "P99"/],
    ['an unknown product', reply('{"tool": "get_product", "arguments": {"product": "yacht"}}'), /no product "yacht"/],
    ['a calculator syntax error', reply('{"tool": "calculator", "arguments": {"expression": "2 +* 3"}}'), /calculator failed: unexpected "\*"/],
    ['an unknown unit', reply('{"tool": "convert_units", "arguments": {"value": 1, "from": "kg", "to": "stone"}}'), /unknown unit "stone"/],
    ['a bad date', reply('{"tool": "date_add", "arguments": {"date": "2023-13-01", "days": 1}}'), /not a calendar date/],
    ['malformed tool_calls arguments', reply('', [{ name: 'find_person', arguments: '{"name": ' }]), /malformed JSON in the arguments of the find_person tool call/],
    ['an answer without a value', reply('{"tool": "answer", "arguments": {}}'), /invalid arguments for answer/],
  ])('%s is an error observation that counts as a step', async (_what, action, message) => {
    const env = await episode();
    const r = await env.step(action);
    expect(r.done).toBe(false);
    expect(r.info.ok).toBe(false);
    expect(r.observation).toMatch(/^Error: /);
    expect(r.observation).toMatch(message);
    expect(r.observation).toMatch(new RegExp(`\\(${env.horizon - 1} tool call\\(s\\) left\\)`));
  });

  it('errors use up the horizon: the last step ends the episode with reward 0', async () => {
    const env = await episode();
    let last;
    for (let k = 0; k < env.horizon; k++) last = await env.step(reply('nothing'));
    expect(last).toMatchObject({ done: true, reward: 0 });
    const r = await runEpisode({ definition: tools, task: TASK, policy: scriptedPolicy(Array(20).fill('{"tool": "calculator", "arguments": {"expression": "1"}}'), 's'), seed: 0 });
    expect(r).toMatchObject({ reward: 0, steps: solveToolsTask(TASK).calls.length + 3, stopReason: 'done', error: null });
  });

  it('a wrong answer ends the episode with reward 0; a right one (however written) with 1', async () => {
    const answer = solveToolsTask(TASK).answer as number;
    const wrong = await (await episode()).step(reply(JSON.stringify({ tool: 'answer', arguments: { value: answer + 1 } })));
    expect(wrong).toMatchObject({ done: true, reward: 0, info: { correct: false } });
    const right = await (await episode()).step(reply(JSON.stringify({ tool: 'answer', arguments: { value: `€${answer.toFixed(2)}` } })));
    expect(right).toMatchObject({ done: true, reward: 1, info: { correct: true } });
  });

  it('answers are normalised: numbers within 0.01 and trimmed, case-folded strings', () => {
    expect(answerMatches('1,234.50 EUR', 1234.5)).toBe(true);
    expect(answerMatches(1234.504, 1234.5)).toBe(true);
    expect(answerMatches('about 1234.52', 1234.5)).toBe(false);
    expect(answerMatches('no idea', 3)).toBe(false);
    expect(answerMatches(' "2024-03-01". ', '2024-03-01')).toBe(true);
    expect(answerMatches('2024-03-02', '2024-03-01')).toBe(false);
  });

  it('tasks are validated: an unknown person or kind is a clear error', () => {
    const r = ToolsTask.safeParse({ ...TASK, person: 'Zelda' });
    expect(r.success).toBe(false);
    expect(r.error!.issues[0]).toMatchObject({ path: ['person'], message: expect.stringMatching(/database 12345 has no person "Zelda" \(its people: /) });
    expect(ToolsTask.safeParse({ ...TASK, kind: 'poem' }).success).toBe(false);
    expect(ToolsTask.safeParse({ ...TASK, currency: 'BTC' }).success).toBe(false);
  });

  it('offers its tools in the chat API form with toolCalls, and only then', async () => {
    expect((await episode()).tools).toBeUndefined();
    const env = await tools.create(ToolsTask.parse(TASK), ToolsOptions.parse({ toolCalls: true }));
    expect(env.tools?.map((t) => t.name)).toEqual(['find_person', 'list_orders', 'get_product', 'calculator', 'convert_units', 'date_add', 'date_diff', 'answer']);
    expect(env.tools?.[2].parameters).toMatchObject({ type: 'object', required: ['product'], additionalProperties: false });
    expect(env.tools?.[2].parameters).not.toHaveProperty('$schema');
    expect(env.systemPrompt).not.toContain('{"tool"');
  });
});
