/**
 * The languages an agent may speak to a web page (WebOptions `actions`), all parsed into one WebAction:
 *
 *   esopt        click 12 · type 12 "milk" · select 12 "Red" · check 12 · scroll down · press Enter · done
 *   browsergym   click('12') · fill('12', "milk") · select_option('12', "Red") · check('12') · scroll(0, 300)
 *                · press('12', "Enter") · keyboard_press("Enter") · noop() · send_msg_to_user("…") (ends: done)
 *   tools        the chat API's tool calls: click {id} · type {id, text} · select {id, option} · check {id}
 *                · scroll {direction} · press {key} · done {}
 *   coordinates  click(312, 140) · type("milk") (into the focused element) · press("Enter") · scroll(300) · done()
 *                — for computer-use agents looking at a screenshot (Chromium only)
 *
 * A reply that is not an action of its grammar is an error observation that uses a step (the environment says
 * which). The first line that parses wins, so a short explanation around the action is tolerated.
 */
import type { PolicyReply, ToolSpec } from '../../shared/ports/policy.ts';
import { ACTION_HELP, KEYS, parseAction, type ParsedAction } from './action.ts';

export type ActionGrammarName = 'esopt' | 'browsergym' | 'tools' | 'coordinates';

export interface ActionGrammar {
  readonly name: ActionGrammarName;
  /** The sentence of the system prompt that teaches the grammar. */
  readonly help: string;
  /** The prompt's lines after it: what the grammar's words mean on a page. */
  readonly notes: string[];
  /** Offered as the chat API's `tools` (the tools grammar only). */
  readonly tools?: ToolSpec[];
  parse(reply: PolicyReply): ParsedAction;
}

function lines(text: string): string[] {
  return text.split('\n').map((l) => l.trim().replace(/^`+|`+$/g, '').trim()).filter((l) => l !== '');
}

/** The first line that parses, or the first line's error. */
function firstOf(reply: PolicyReply, parseLine: (line: string) => ParsedAction, help: string): ParsedAction {
  let firstError: string | null = null;
  for (const line of lines(reply.text)) {
    const r = parseLine(line);
    if (r.ok) return r;
    firstError ??= r.error;
  }
  return { ok: false, error: firstError ?? `empty reply; actions are: ${help}` };
}

/** `name(arg, …)`: a call of JavaScript-ish literals — quoted strings (' or ") and numbers — nothing else. */
function callOf(line: string): { name: string; args: (string | number)[] } | null {
  const m = /^([a-z_]+)\s*\((.*)\)\s*;?$/.exec(line);
  if (!m) return null;
  const args: (string | number)[] = [];
  let rest = m[2]!.trim();
  while (rest !== '') {
    const str = /^("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*(,|$)/.exec(rest);
    const num = /^(-?\d+(?:\.\d+)?)\s*(,|$)/.exec(rest);
    if (str) {
      const raw = str[1]!;
      try {
        args.push(JSON.parse(raw.startsWith("'") ? `"${raw.slice(1, -1).replace(/\\'/g, "'").replace(/"/g, '\\"')}"` : raw) as string);
      } catch {
        return null;
      }
      rest = rest.slice(str[0].length).trim();
    } else if (num) {
      args.push(Number(num[1]));
      rest = rest.slice(num[0].length).trim();
    } else return null;
  }
  return { name: m[1]!, args };
}

function elementId(arg: string | number | undefined): number | null {
  const s = String(arg ?? '');
  return /^\d{1,6}$/.test(s) ? Number(s) : null;
}

function keyOf(arg: string | number | undefined): string | null {
  return KEYS.find((k) => k.toLowerCase() === String(arg ?? '').toLowerCase()) ?? null;
}

const BROWSERGYM_HELP = `click('<id>') | fill('<id>', "<text>") | select_option('<id>', "<option>") | check('<id>') | press('<id>', "<key>") | keyboard_press("<key>") | scroll(0, <dy>) | noop() | send_msg_to_user("<text>") when the goal is reached`;

function browsergymLine(line: string): ParsedAction {
  const call = callOf(line);
  if (!call) return { ok: false, error: `not an action call ${JSON.stringify(line.slice(0, 60))}; actions are: ${BROWSERGYM_HELP}` };
  const [a, b] = call.args;
  const id = elementId(a);
  const needId = (what: string): ParsedAction => ({ ok: false, error: `${call.name} needs ${what}, e.g. ${call.name}('12'${what.includes('text') ? ', "text"' : ''})` });
  switch (call.name) {
    case 'click':
    case 'check':
      return id === null || call.args.length !== 1 ? needId('an element id') : { ok: true, action: { kind: call.name, id } };
    case 'fill':
      return id === null || typeof b !== 'string' ? needId('an element id and a text') : { ok: true, action: { kind: 'type', id, text: b } };
    case 'select_option':
      return id === null || typeof b !== 'string' ? needId('an element id and an option text') : { ok: true, action: { kind: 'select', id, text: b } };
    case 'press': {
      const key = keyOf(b);
      if (id === null || !key) return { ok: false, error: `press needs an element id and one key of: ${KEYS.join(', ')}` };
      return { ok: true, action: { kind: 'press-on', id, key } };
    }
    case 'keyboard_press': {
      const key = keyOf(a);
      return key ? { ok: true, action: { kind: 'press', key } } : { ok: false, error: `keyboard_press needs one key of: ${KEYS.join(', ')}` };
    }
    case 'scroll':
      if (typeof a !== 'number' || typeof b !== 'number' || b === 0) return { ok: false, error: 'scroll needs two numbers, scroll(0, 300) down or scroll(0, -300) up' };
      return { ok: true, action: { kind: 'scroll', direction: b > 0 ? 'down' : 'up' } };
    case 'noop':
      return call.args.length === 0 ? { ok: true, action: { kind: 'noop' } } : { ok: false, error: 'noop() takes no arguments' };
    case 'send_msg_to_user':
      return { ok: true, action: { kind: 'done' } };
    default:
      return { ok: false, error: `unknown action ${call.name}; actions are: ${BROWSERGYM_HELP}` };
  }
}

const COORDINATES_HELP = 'click(<x>, <y>) | type("<text>") into the focused element | press("<key>") | scroll(<dy>) | done()';

function coordinatesLine(line: string): ParsedAction {
  const call = callOf(line);
  if (!call) return { ok: false, error: `not an action call ${JSON.stringify(line.slice(0, 60))}; actions are: ${COORDINATES_HELP}` };
  const [a, b] = call.args;
  switch (call.name) {
    case 'click':
      if (typeof a !== 'number' || typeof b !== 'number' || call.args.length !== 2) return { ok: false, error: 'click needs x and y in pixels of the screenshot, e.g. click(312, 140)' };
      return { ok: true, action: { kind: 'click-at', x: a, y: b } };
    case 'type':
      return typeof a === 'string' && call.args.length === 1 ? { ok: true, action: { kind: 'type-focused', text: a } } : { ok: false, error: 'type needs one quoted text, e.g. type("milk")' };
    case 'press': {
      const key = keyOf(a);
      return key ? { ok: true, action: { kind: 'press', key } } : { ok: false, error: `press needs one key of: ${KEYS.join(', ')}` };
    }
    case 'scroll':
      return typeof a === 'number' && a !== 0 ? { ok: true, action: { kind: 'scroll', direction: a > 0 ? 'down' : 'up' } } : { ok: false, error: 'scroll needs a distance, scroll(300) down or scroll(-300) up' };
    case 'done':
      return call.args.length === 0 ? { ok: true, action: { kind: 'done' } } : { ok: false, error: 'done() takes no arguments' };
    default:
      return { ok: false, error: `unknown action ${call.name}; actions are: ${COORDINATES_HELP}` };
  }
}

const id = { type: 'integer', minimum: 0, description: 'the element id shown in brackets' };
const TOOLS: ToolSpec[] = [
  { name: 'click', description: 'Click an element.', parameters: { type: 'object', properties: { id }, required: ['id'], additionalProperties: false } },
  { name: 'type', description: 'Replace the text of a text field.', parameters: { type: 'object', properties: { id, text: { type: 'string' } }, required: ['id', 'text'], additionalProperties: false } },
  { name: 'select', description: 'Choose an option of a select by its text.', parameters: { type: 'object', properties: { id, option: { type: 'string' } }, required: ['id', 'option'], additionalProperties: false } },
  { name: 'check', description: 'Check a checkbox or radio button.', parameters: { type: 'object', properties: { id }, required: ['id'], additionalProperties: false } },
  { name: 'scroll', description: 'Scroll the page.', parameters: { type: 'object', properties: { direction: { enum: ['up', 'down'] } }, required: ['direction'], additionalProperties: false } },
  { name: 'press', description: 'Press a key on the focused element.', parameters: { type: 'object', properties: { key: { enum: [...KEYS] } }, required: ['key'], additionalProperties: false } },
  { name: 'done', description: 'Say the goal is reached.', parameters: { type: 'object', properties: {}, additionalProperties: false } },
];

function toolsParse(reply: PolicyReply): ParsedAction {
  const call = reply.toolCalls?.[0];
  if (!call) return { ok: false, error: 'call one of the tools (click, type, select, check, scroll, press, done); a reply without a tool call is no action' };
  const args = (call.arguments ?? {}) as Record<string, unknown>;
  const n = elementId(typeof args.id === 'number' || typeof args.id === 'string' ? args.id : undefined);
  const text = typeof args.text === 'string' ? args.text : typeof args.option === 'string' ? args.option : null;
  switch (call.name) {
    case 'click':
    case 'check':
      return n === null ? { ok: false, error: `${call.name} needs {"id": <element id>}` } : { ok: true, action: { kind: call.name, id: n } };
    case 'type':
    case 'select':
      return n === null || text === null ? { ok: false, error: `${call.name} needs {"id": <element id>, "${call.name === 'type' ? 'text' : 'option'}": "…"}` } : { ok: true, action: { kind: call.name, id: n, text } };
    case 'scroll':
      return args.direction === 'up' || args.direction === 'down' ? { ok: true, action: { kind: 'scroll', direction: args.direction } } : { ok: false, error: 'scroll needs {"direction": "up" | "down"}' };
    case 'press': {
      const key = keyOf(typeof args.key === 'string' ? args.key : undefined);
      return key ? { ok: true, action: { kind: 'press', key } } : { ok: false, error: `press needs {"key": one of ${KEYS.join(', ')}}` };
    }
    case 'done':
      return { ok: true, action: { kind: 'done' } };
    default:
      return { ok: false, error: `no tool ${JSON.stringify(call.name.slice(0, 40))}; the tools are click, type, select, check, scroll, press, done` };
  }
}

export const GRAMMARS: Record<ActionGrammarName, ActionGrammar> = {
  esopt: {
    name: 'esopt',
    help: `Reply with exactly one action per turn: ${ACTION_HELP}.`,
    notes: [
      'Ids are stable while an element stays on the page. Text to type or options to select go in double quotes (JSON strings).',
      '"press" sends the key to the focused element (click an element to focus it). Use "scroll down"/"scroll up" to see more of the page,',
      'and "done" when you believe the goal is reached.',
    ],
    parse: parseAction,
  },
  browsergym: {
    name: 'browsergym',
    help: `Reply with exactly one action per turn, as a call: ${BROWSERGYM_HELP}.`,
    notes: ['Element ids are the numbers in brackets, quoted as strings. Texts are quoted strings.', 'send_msg_to_user ends the episode: send it when you believe the goal is reached.'],
    parse: (r) => firstOf(r, browsergymLine, BROWSERGYM_HELP),
  },
  tools: {
    name: 'tools',
    help: 'Act by calling exactly one of the tools per turn: click, type, select, check, scroll, press, and done when you believe the goal is reached.',
    notes: ['Element ids are the numbers in brackets.'],
    tools: TOOLS,
    parse: toolsParse,
  },
  coordinates: {
    name: 'coordinates',
    help: `Reply with exactly one action per turn: ${COORDINATES_HELP}.`,
    notes: ['x and y are pixels of the screenshot, from its top-left corner. Click a field to focus it before typing.', 'done() ends the episode: reply with it when you believe the goal is reached.'],
    parse: (r) => firstOf(r, coordinatesLine, COORDINATES_HELP),
  },
};
