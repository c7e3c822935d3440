/**
 * A user's web agent and a user's web app, both on loopback, for the rehearsal's web evaluations.
 *
 * The app: a to-do list laid out at fixed positions (so a computer-use agent's clicks can be scripted from its
 * own layout), its state at /api/state, every request wanting the evaluation's key when one is set.
 *
 * The agent: an OpenAI-compatible chat endpoint that plays two goals in whichever view and grammar the system
 * prompt teaches — "Add a to-do called …" on the app, and "Click the button …" (the MiniWoB-protocol pages) —
 * reading element ids from the text view or the tree, and clicking the app's known pixels when it is shown only
 * a screenshot. It counts the pictures it was sent, so the rehearsal sees screenshots reached it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { bearerToken, tokenMatches } from '../../../shared/bearer-token.ts';

export interface RehearsalApp {
  url: string;
  /** The to-dos added, in order. */
  readonly todos: string[];
  /** Requests that came without the key it wants. */
  readonly refused: number;
  close(): Promise<void>;
}

export async function startTodoApp(key?: string): Promise<RehearsalApp> {
  const todos: string[] = [];
  let refused = 0;
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const given = bearerToken(req.headers.authorization);
      if (key !== undefined && (given === null || !tokenMatches(given, key))) {
        refused++;
        res.writeHead(401, { 'content-type': 'text/plain' });
        return res.end('no key');
      }
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname === '/todos' && req.method === 'POST') {
        todos.push(new URLSearchParams(body).get('title') ?? '');
        res.writeHead(303, { location: '/todos' });
        return res.end();
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
<ul id="items" class="at" style="left:40px;top:200px">${todos.map((t) => `<li>${t.replace(/[<&]/g, '')}</li>`).join('')}</ul></body></html>`);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    todos,
    get refused() {
      return refused;
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Where the app's fields are, in pixels of the 1280×720 screenshot (the app's own CSS puts them there). */
const PIXELS = { field: [140, 115], add: [340, 115] } as const;

type Grammar = 'esopt' | 'browsergym' | 'tools' | 'coordinates';
type Part = { type: string; text?: string; image_url?: { url: string } };
interface WireMessage {
  role: string;
  content?: string | Part[] | null;
}

const textOf = (m: WireMessage) => (typeof m.content === 'string' ? m.content : (m.content ?? []).map((p) => p.text ?? '').join('\n'));

function grammarOf(system: string, tools: boolean): Grammar {
  if (tools) return 'tools';
  if (system.includes('send_msg_to_user')) return 'browsergym';
  if (system.includes('click(<x>, <y>)')) return 'coordinates';
  return 'esopt';
}

type Move = { kind: 'type'; id: string | null; text: string } | { kind: 'click'; id: string | null; at?: readonly [number, number] } | { kind: 'done' };

/** The next move toward the goal, from what the agent was shown last (ids may be null: a screenshot-only view). */
function plan(goal: string, seen: string, turn: number): Move {
  const word = /Click the button "([^"]+)"/.exec(goal)?.[1];
  if (word) return turn === 0 ? { kind: 'click', id: new RegExp(`\\[(\\d+)\\] button "${word}"`).exec(seen)?.[1] ?? null } : { kind: 'done' };
  const todo = /Add a to-do called "([^"]+)"/.exec(goal)?.[1] ?? 'milk';
  const field = /\[(\d+)\] textbox/.exec(seen)?.[1] ?? null;
  const add = /\[(\d+)\] button "Add"/.exec(seen)?.[1] ?? null;
  return [{ kind: 'type', id: field, text: todo } as const, { kind: 'click', id: add, at: PIXELS.add } as const, { kind: 'done' } as const][turn] ?? { kind: 'done' };
}

/** The move in the grammar's words: text, or a tool call. */
function say(move: Move, grammar: Grammar, turn: number): { content: string | null; toolCalls?: { name: string; arguments: unknown }[] } {
  const q = JSON.stringify;
  switch (grammar) {
    case 'esopt':
      return { content: move.kind === 'done' ? 'done' : move.kind === 'type' ? `type ${move.id} ${q(move.text)}` : `click ${move.id}` };
    case 'browsergym':
      return { content: move.kind === 'done' ? 'send_msg_to_user("done")' : move.kind === 'type' ? `fill('${move.id}', ${q(move.text)})` : `click('${move.id}')` };
    case 'tools':
      return { content: null, toolCalls: [move.kind === 'done' ? { name: 'done', arguments: {} } : move.kind === 'type' ? { name: 'type', arguments: { id: Number(move.id), text: move.text } } : { name: 'click', arguments: { id: Number(move.id) } }] };
    case 'coordinates': {
      // Typing needs focus first: the click on the field is a turn of its own.
      if (move.kind === 'type') return { content: turn === 0 ? `click(${PIXELS.field.join(', ')})` : `type(${q(move.text)})` };
      if (move.kind === 'click') return { content: `click(${(move.at ?? PIXELS.add).join(', ')})` };
      return { content: 'done()' };
    }
  }
}

export interface WebAgent {
  baseUrl: string;
  model: string;
  readonly calls: { answered: number; pictures: number };
  close(): Promise<void>;
}

export async function startWebAgent(): Promise<WebAgent> {
  const calls = { answered: 0, pictures: 0 };
  const app = new Hono();
  app.post('/v1/chat/completions', async (c) => {
    const body = (await c.req.json()) as { messages: WireMessage[]; tools?: unknown[] };
    const messages = body.messages;
    calls.answered++;
    for (const m of messages) if (Array.isArray(m.content)) calls.pictures += m.content.filter((p) => p.type === 'image_url').length;
    const system = textOf(messages[0] ?? { role: 'system' });
    const grammar = grammarOf(system, Boolean(body.tools?.length));
    const goal = /Goal: (.*)/.exec(messages.map(textOf).join('\n'))?.[1] ?? '';
    const assistantTurns = messages.filter((m) => m.role === 'assistant').length;
    // A coordinates agent spends one more turn (focusing the field), so its plan is a turn behind after the first.
    const step = grammar === 'coordinates' && !/Click the button/.test(goal) ? Math.max(0, assistantTurns - 1) : assistantTurns;
    const seen = [...messages].reverse().map(textOf).find((t) => /\[\d+\]|Goal:/.test(t)) ?? '';
    const reply = say(plan(goal, seen, step), grammar, assistantTurns);
    const promptTokens = Math.ceil(JSON.stringify(messages).length / 4);
    const message = reply.toolCalls
      ? { role: 'assistant', content: null, tool_calls: reply.toolCalls.map((t, i) => ({ id: `call_${calls.answered}_${i}`, type: 'function', function: { name: t.name, arguments: JSON.stringify(t.arguments) } })) }
      : { role: 'assistant', content: reply.content };
    return c.json({
      id: `chatcmpl-${calls.answered}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: 'rehearsal-web-agent',
      choices: [{ index: 0, message, finish_reason: reply.toolCalls ? 'tool_calls' : 'stop' }],
      usage: { prompt_tokens: promptTokens, completion_tokens: 6, total_tokens: promptTokens + 6 },
    });
  });
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    model: 'rehearsal-web-agent',
    calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
