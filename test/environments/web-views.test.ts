/**
 * What a web agent sees and says: the views (text, accessibility tree, screenshot with or without ids drawn)
 * and the action grammars (esopt's, BrowserGym's, tool calls, coordinates), each played to the end of a task
 * on a small app of this test's own in real Chromium, plus the parsers and the option rules on their own.
 */
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage, Policy, PolicyReply } from '../../shared/ports/policy.ts';
import { runEpisode } from '../../environments/episode-runner.ts';
import { EMBEDDED_OUTBOUND } from '../../environments/outbound/address-policy.ts';
import { web } from '../../environments/web/definition.ts';
import { GRAMMARS } from '../../environments/web/action-grammar.ts';
import { closeWebRuntime } from '../../environments/web/runtime.ts';
import type { EnvironmentContext } from '../../environments/environment.ts';

const chromium = existsSync('/usr/bin/chromium') || Boolean(process.env.ESOPT_CHROMIUM);

const reply = (text: string): PolicyReply => ({ text, tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 });
const call = (name: string, args: unknown): PolicyReply => ({ text: '', toolCalls: [{ name, arguments: args }], tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 });

describe('the grammars parse their own actions, and say what is wrong with others', () => {
  it('esopt', () => {
    expect(GRAMMARS.esopt.parse(reply('type 3 "milk"'))).toEqual({ ok: true, action: { kind: 'type', id: 3, text: 'milk' } });
    expect(GRAMMARS.esopt.parse(reply("click('3')")).ok).toBe(false);
  });

  it('browsergym', () => {
    const p = (t: string) => GRAMMARS.browsergym.parse(reply(t));
    expect(p("I will click it.\nclick('12')")).toEqual({ ok: true, action: { kind: 'click', id: 12 } });
    expect(p(`fill('4', "it's \\"milk\\"")`)).toEqual({ ok: true, action: { kind: 'type', id: 4, text: 'it\'s "milk"' } });
    expect(p("fill('4', 'milk')")).toEqual({ ok: true, action: { kind: 'type', id: 4, text: 'milk' } });
    expect(p('select_option(\'7\', "Red")')).toEqual({ ok: true, action: { kind: 'select', id: 7, text: 'Red' } });
    expect(p("press('4', \"Enter\")")).toEqual({ ok: true, action: { kind: 'press-on', id: 4, key: 'Enter' } });
    expect(p('keyboard_press("escape")')).toEqual({ ok: true, action: { kind: 'press', key: 'Escape' } });
    expect(p('scroll(0, -300)')).toEqual({ ok: true, action: { kind: 'scroll', direction: 'up' } });
    expect(p('noop()')).toEqual({ ok: true, action: { kind: 'noop' } });
    expect(p('send_msg_to_user("finished")')).toEqual({ ok: true, action: { kind: 'done' } });
    const wrong = p("fill('4')");
    expect(wrong.ok === false && wrong.error).toMatch(/fill needs an element id and a text/);
    const unknown = p("hover('4')");
    expect(unknown.ok === false && unknown.error).toMatch(/unknown action hover/);
    expect(p('click 4').ok).toBe(false);
  });

  it('tools', () => {
    const p = (name: string, args: unknown) => GRAMMARS.tools.parse(call(name, args));
    expect(p('type', { id: 2, text: 'milk' })).toEqual({ ok: true, action: { kind: 'type', id: 2, text: 'milk' } });
    expect(p('select', { id: '5', option: 'Red' })).toEqual({ ok: true, action: { kind: 'select', id: 5, text: 'Red' } });
    expect(p('done', {})).toEqual({ ok: true, action: { kind: 'done' } });
    const missing = p('type', { id: 2 });
    expect(missing.ok === false && missing.error).toMatch(/type needs \{"id"/);
    const text = GRAMMARS.tools.parse(reply('click 2'));
    expect(text.ok === false && text.error).toMatch(/call one of the tools/);
    expect(GRAMMARS.tools.tools!.map((t) => t.name)).toEqual(['click', 'type', 'select', 'check', 'scroll', 'press', 'done']);
  });

  it('coordinates', () => {
    const p = (t: string) => GRAMMARS.coordinates.parse(reply(t));
    expect(p('click(312, 140.5)')).toEqual({ ok: true, action: { kind: 'click-at', x: 312, y: 140.5 } });
    expect(p('type("milk")')).toEqual({ ok: true, action: { kind: 'type-focused', text: 'milk' } });
    expect(p('scroll(300)')).toEqual({ ok: true, action: { kind: 'scroll', direction: 'down' } });
    expect(p('done()')).toEqual({ ok: true, action: { kind: 'done' } });
    const one = p('click(312)');
    expect(one.ok === false && one.error).toMatch(/click needs x and y/);
  });
});

describe('the options say what each view and grammar needs, at the field', () => {
  const issues = (o: unknown) => {
    const r = web.optionsSchema.safeParse(o);
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };
  it('refuses screenshots without a browser that draws, coordinates without a screenshot, repeated views', () => {
    expect(issues({ backend: 'happy-dom', observation: ['screenshot'] })).toEqual(['observation: a screenshot observation needs backend "chromium" (happy-dom draws nothing)']);
    expect(issues({ actions: 'coordinates' })).toEqual(['actions: coordinates are pixels of a screenshot: add "screenshot" to observation']);
    expect(issues({ markIds: true })).toEqual(['markIds: markIds draws ids on screenshots: add "screenshot" to observation']);
    expect(issues({ observation: ['text', 'text'] })).toEqual(['observation: each view at most once']);
    expect(issues({ observation: ['html'] })[0]).toMatch(/^observation\.0: /);
    expect(issues({ actions: 'playwright' })[0]).toMatch(/^actions: /);
    expect(web.optionsSchema.parse({})).toMatchObject({ observation: ['text'], actions: 'esopt', markIds: false });
  });
});

describe('the accessibility tree (happy-dom: the same bridge as Chromium)', () => {
  it('shows the whole page with the ids actions use, so nothing is out of reach behind a scroll', async () => {
    const options = web.optionsSchema.parse({ backend: 'happy-dom', observation: ['axtree'], actions: 'browsergym', screenLines: 5 });
    const [sampled] = web.sampleTasks('eval', 1, 3, { ...options, taskTypes: ['fill-form'] });
    const env = await web.create(sampled!.task, options);
    try {
      expect(env.systemPrompt).toMatch(/accessibility tree/);
      expect(env.systemPrompt).toMatch(/fill\('<id>', "<text>"\)/);
      const first = await env.reset(0);
      expect(first).toMatch(/^RootWebArea /m);
      expect(first).toMatch(/^\t+\[\d+\] textbox "/m);
      expect(first).toMatch(/^\t+\[\d+\] button "/m);
      // The text view's five-line window would hide the button; the tree shows it and it can be pressed.
      const button = /\[(\d+)\] button "/.exec(first)![1];
      const pressed = await env.step(reply(`click('${button}')`));
      expect(pressed.info).toMatchObject({ ok: true });
    } finally {
      await env.close();
    }
  });
});

/** PNG's width and height, from its IHDR chunk. */
function pngSize(png: Uint8Array): { width: number; height: number } {
  const b = Buffer.from(png);
  expect(b.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}
const pngOf = (url: string) => new Uint8Array(Buffer.from(url.replace(/^data:image\/png;base64,/, ''), 'base64'));

describe.skipIf(!chromium)('every view and grammar, played to the end on an app in Chromium', () => {
  let server: Server;
  let origin: string;
  let todos: string[] = [];
  beforeAll(async () => {
    // Fixed positions, so a computer-use agent's clicks can be scripted from the page's own layout.
    server = createServer((req, res) => {
      const url = new URL(req.url!, 'http://x');
      if (url.pathname === '/todos' && req.method === 'POST') {
        let body = '';
        req.on('data', (d) => (body += d));
        req.on('end', () => {
          todos.push(new URLSearchParams(body).get('title') ?? '');
          res.writeHead(303, { location: '/todos' });
          res.end();
        });
        return;
      }
      if (url.pathname === '/api/state') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ todos }));
      }
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(`<!doctype html><html><head><title>Todos</title><style>body{margin:0;font:16px sans-serif} .at{position:absolute}</style></head><body>
<h1 class="at" style="left:40px;top:10px;margin:0">Todos</h1>
<form method="post" action="/todos"><input class="at" style="left:40px;top:100px;width:200px;height:30px" name="title" aria-label="New todo">
<button class="at" style="left:300px;top:100px;width:80px;height:30px" type="submit">Add</button></form>
<ul id="items" class="at" style="left:40px;top:200px">${todos.map((t) => `<li>${t}</li>`).join('')}</ul></body></html>`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await closeWebRuntime();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const context: EnvironmentContext = { outbound: EMBEDDED_OUTBOUND, allowCommands: false };
  const task = { start: '/todos', goal: 'Add a to-do called "milk".', check: { fetch: '/api/state', predicate: { path: '/fetched/json/todos', includes: 'milk' } } };
  const optionsOf = (extra: Record<string, unknown>) => web.optionsSchema.parse({ backend: 'chromium', actionTimeoutMs: 8_000, app: { url: origin, horizon: 6 }, ...extra });
  const idOf = (messages: ChatMessage[], role: string) => new RegExp(`\\[(\\d+)\\] ${role}`).exec(String(messages.at(-1)!.content))![1]!;
  /** Plays `moves` in order, and records every chat it was shown. */
  const scripted = (moves: ((m: ChatMessage[]) => PolicyReply)[], seen: ChatMessage[][] = []): Policy => ({
    async act(messages, { step }) {
      seen.push(messages);
      return moves[step]!(messages);
    },
  });

  const GAMES: [string, Record<string, unknown>, ((m: ChatMessage[]) => PolicyReply)[]][] = [
    ['esopt, text view', {}, [(m) => reply(`type ${idOf(m, 'textbox')} "milk"`), (m) => reply(`click ${idOf(m, 'button "Add"')}`), () => reply('done')]],
    [
      'BrowserGym actions, accessibility tree',
      { observation: ['axtree'], actions: 'browsergym' },
      [(m) => reply(`fill('${idOf(m, 'textbox')}', "milk")`), (m) => reply(`click('${idOf(m, 'button "Add"')}')`), () => reply('send_msg_to_user("added")')],
    ],
    ['tool calls, text and tree', { observation: ['text', 'axtree'], actions: 'tools' }, [(m) => call('type', { id: Number(idOf(m, 'textbox')), text: 'milk' }), (m) => call('click', { id: Number(idOf(m, 'button "Add"')) }), () => call('done', {})]],
    ['coordinates, screenshot only', { observation: ['screenshot'], actions: 'coordinates' }, [() => reply('click(140, 115)'), () => reply('type("milk")'), () => reply('click(340, 115)'), () => reply('done()')]],
  ];

  for (const [name, extra, moves] of GAMES) {
    it(`${name}: reaches the goal`, async () => {
      todos = [];
      const result = await runEpisode({ definition: web, task, options: optionsOf(extra), policy: scripted(moves), seed: 1, context });
      expect(result.error).toBeNull();
      expect(result.stopReason).toBe('done');
      expect(todos).toEqual(['milk']);
      expect(result.reward).toBe(1);
    }, 60_000);
  }

  it('a wrong action is an error observation that uses a step, in every grammar', async () => {
    const wrong: [Record<string, unknown>, PolicyReply, RegExp][] = [
      [{ actions: 'browsergym' }, reply("fill('1')"), /fill needs an element id and a text/],
      [{ actions: 'tools' }, reply('click 1'), /call one of the tools/],
      [{ observation: ['screenshot'], actions: 'coordinates' }, reply('click(5000, 10)'), /\(5000, 10\) is outside the 1280×720 screenshot/],
    ];
    for (const [extra, bad, error] of wrong) {
      todos = [];
      const result = await runEpisode({ definition: web, task, options: optionsOf(extra), policy: scripted([() => bad, () => bad, () => bad, () => bad, () => bad, () => bad]), seed: 1, context });
      const second = result.transcript.find((e) => e.kind === 'observation' && e.step === 1);
      expect(second?.kind === 'observation' && second.text).toMatch(error);
      expect(second?.kind === 'observation' && second.info).toMatchObject({ ok: false });
      expect(result.steps).toBe(6);
      expect(result.reward).toBe(0);
    }
  }, 90_000);

  it('shows the screenshot with the newest observation only, with ids drawn when asked, and keeps a frame of every step', async () => {
    const plain: ChatMessage[][] = [];
    const marked: ChatMessage[][] = [];
    const frames: [number, Uint8Array][] = [];
    const moves = [(m: ChatMessage[]) => reply(`type ${idOf(m, 'textbox')} "milk"`), (m: ChatMessage[]) => reply(`click ${idOf(m, 'button "Add"')}`), () => reply('done')];
    todos = [];
    const result = await runEpisode({
      definition: web,
      task,
      options: optionsOf({ observation: ['text', 'screenshot'] }),
      policy: scripted(moves, plain),
      seed: 1,
      context,
      frames: async (step, png) => (frames.push([step, png]), `frame-${step}.png`),
    });
    expect(result.reward).toBe(1);
    todos = [];
    await runEpisode({ definition: web, task, options: optionsOf({ observation: ['text', 'screenshot'], markIds: true }), policy: scripted(moves, marked), seed: 1, context });

    for (const chat of plain) {
      const withImages = chat.filter((m) => m.images?.length);
      expect(withImages).toHaveLength(1);
      expect(withImages[0]).toBe(chat.at(-1));
      expect(pngSize(pngOf(withImages[0]!.images![0]!))).toEqual({ width: 1280, height: 720 });
    }
    expect(plain[0]![0]!.content).toMatch(/a screenshot of the browser window/);
    // The ids drawn on the page make another picture of the same page.
    expect(marked[0]!.at(-1)!.images![0]).not.toBe(plain[0]!.at(-1)!.images![0]);
    expect(marked[0]![0]!.content).toMatch(/with each element's id drawn/);
    // A frame for the start and every step, the last of the page as the episode ended (its page closed since).
    expect(frames.map(([s]) => s)).toEqual([0, 1, 2, 3]);
    for (const [, png] of frames) expect(pngSize(png)).toEqual({ width: 1280, height: 720 });
    const observed = result.transcript.filter((e) => e.kind === 'observation');
    expect(observed.map((e) => e.kind === 'observation' && e.frame)).toEqual(['frame-0.png', 'frame-1.png', 'frame-2.png', 'frame-3.png']);
  }, 90_000);
});
