/** The web action language: parsing one reply into one action, with a clear error when it is not one. */
import type { PolicyReply } from '../../shared/ports/policy.ts';

export type WebAction =
  | { kind: 'click' | 'check'; id: number }
  | { kind: 'type' | 'select'; id: number; text: string }
  | { kind: 'scroll'; direction: 'up' | 'down' }
  | { kind: 'press'; key: string }
  /** BrowserGym's press(bid, key): focus the element, then the key. */
  | { kind: 'press-on'; id: number; key: string }
  /** Coordinates of the screenshot (Chromium): a mouse click there, text typed into whatever has focus. */
  | { kind: 'click-at'; x: number; y: number }
  | { kind: 'type-focused'; text: string }
  | { kind: 'noop' }
  | { kind: 'done' };

/** Keys `press` accepts; they go to the focused element as keydown/keyup. */
export const KEYS = ['Enter', 'Escape', 'Backspace', 'Delete', 'ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight', 'Home', 'End', 'PageUp', 'PageDown'] as const;

export const ACTION_HELP = 'click <id> | type <id> "<text>" | select <id> "<option>" | check <id> | scroll <up|down> | press <key> | done';

export type ParsedAction = { ok: true; action: WebAction } | { ok: false; error: string };

function quoted(text: string): string | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'string' ? value : null;
  } catch {
    return null;
  }
}

/** The first line that is an action wins, so a short explanation around it is tolerated. */
export function parseAction(reply: PolicyReply): ParsedAction {
  const lines = reply.text.split('\n').map((l) => l.trim().replace(/^`+|`+$/g, '').trim()).filter((l) => l !== '');
  if (lines.length === 0 && reply.toolCalls?.length) {
    const call = reply.toolCalls[0];
    const args = (call.arguments ?? {}) as Record<string, unknown>;
    lines.push([call.name, args.id, args.text === undefined ? undefined : JSON.stringify(args.text), args.direction, args.key].filter((x) => x !== undefined).join(' '));
  }
  let firstError: string | null = null;
  for (const line of lines) {
    const r = parseLine(line);
    if (r.ok) return r;
    firstError ??= r.error;
  }
  return { ok: false, error: firstError ?? `empty reply; actions are: ${ACTION_HELP}` };
}

function parseLine(line: string): ParsedAction {
  const [verb = '', ...rest] = line.split(/\s+/);
  const tail = line.slice(verb.length).trim();
  const id = (s: string | undefined) => (s !== undefined && /^\[?\d{1,6}\]?$/.test(s) ? Number(s.replace(/[[\]]/g, '')) : null);
  switch (verb.toLowerCase()) {
    case 'click':
    case 'check': {
      const n = id(rest[0]);
      if (n === null || rest.length !== 1) return { ok: false, error: `${verb} needs one element id, e.g. "${verb.toLowerCase()} 3"` };
      return { ok: true, action: { kind: verb.toLowerCase() as 'click' | 'check', id: n } };
    }
    case 'type':
    case 'select': {
      const n = id(rest[0]);
      const text = quoted(tail.slice((rest[0] ?? '').length).trim());
      if (n === null || text === null) return { ok: false, error: `${verb} needs an element id and a quoted string, e.g. ${verb.toLowerCase()} 3 "hello"` };
      return { ok: true, action: { kind: verb.toLowerCase() as 'type' | 'select', id: n, text } };
    }
    case 'scroll':
      if (rest.length !== 1 || (rest[0] !== 'up' && rest[0] !== 'down')) return { ok: false, error: 'scroll needs a direction: "scroll up" or "scroll down"' };
      return { ok: true, action: { kind: 'scroll', direction: rest[0] } };
    case 'press': {
      const key = KEYS.find((k) => k.toLowerCase() === (rest[0] ?? '').toLowerCase());
      if (rest.length !== 1 || !key) return { ok: false, error: `press needs one key of: ${KEYS.join(', ')}` };
      return { ok: true, action: { kind: 'press', key } };
    }
    case 'done':
      return rest.length === 0 ? { ok: true, action: { kind: 'done' } } : { ok: false, error: '"done" takes no arguments' };
    default:
      return { ok: false, error: `unknown action ${JSON.stringify(line.slice(0, 60))}; actions are: ${ACTION_HELP}` };
  }
}
