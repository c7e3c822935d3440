/**
 * What a web agent sees and says, as options of the environment (WebOptions `observation`, `markIds`,
 * `actions`): the system prompt that teaches both, the text part of each observation, whether a screenshot
 * goes with it, and the parser of its replies. The three web episode kinds (generated pages, MiniWoB folders,
 * a user's app) share it, so every view works with every grammar wherever the backend can draw.
 */
import { z } from 'zod';
import type { PolicyReply, ToolSpec } from '../../shared/ports/policy.ts';
import type { ParsedAction } from './action.ts';
import { GRAMMARS, type ActionGrammarName } from './action-grammar.ts';
import type { WebPage } from './backend.ts';

export const WebObservation = z.enum(['text', 'axtree', 'screenshot']);
export type WebObservation = z.infer<typeof WebObservation>;

export const WebActionGrammar = z.enum(['esopt', 'browsergym', 'tools', 'coordinates'] satisfies [ActionGrammarName, ...ActionGrammarName[]]);

/** The accessibility tree is the whole page: bounded, so a page of a million nodes cannot make a prompt of them. */
export const AXTREE_MAX_LINES = 1000;

/**
 * With an accessibility tree in view the agent sees the whole page, so the text view's scrolling window is
 * lifted too: every element it can see is one it may act on.
 */
const WHOLE_PAGE_LINES = 1_000_000;

const VIEW: Record<WebObservation, string> = {
  text: 'the visible part of the page: one line per element,\ninteractive ones as [id] role "label" (plus value, checked/unchecked, selected options...), text as text "...".',
  axtree: 'the whole page as an accessibility tree: one node per line, indented by depth, interactive elements as [id] role "name" with their state, text as StaticText "...".',
  screenshot: 'a screenshot of the browser window',
};

export interface AgentInterfaceOptions {
  observation: WebObservation[];
  markIds: boolean;
  actions: ActionGrammarName;
  screenLines: number;
}

export interface AgentInterface {
  readonly systemPrompt: string;
  readonly tools?: ToolSpec[];
  readonly showsScreenshot: boolean;
  /** Lines of the text view's window (the page opens with it). */
  readonly screenLines: number;
  parse(reply: PolicyReply): ParsedAction;
  /** The text part of an observation: the text view, the tree, or both; a screenshot-only view still numbers the elements. */
  view(page: WebPage): Promise<string>;
  /** The reply as the next observation's "Last action:" line. */
  said(reply: PolicyReply): string;
}

export function agentInterface(o: AgentInterfaceOptions): AgentInterface {
  const grammar = GRAMMARS[o.actions];
  const seen = o.observation;
  const sees = (v: WebObservation) => seen.includes(v);
  const described = seen.map((v) => (v === 'screenshot' && o.markIds ? `${VIEW.screenshot} with each element's id drawn at its top-left corner` : VIEW[v]));
  const systemPrompt = [`You operate a web page to reach a goal. Each observation shows the goal and ${described.join('; and ')}`, grammar.help, ...grammar.notes].join('\n');
  return {
    systemPrompt,
    ...(grammar.tools ? { tools: grammar.tools } : {}),
    showsScreenshot: sees('screenshot'),
    screenLines: sees('axtree') ? WHOLE_PAGE_LINES : o.screenLines,
    parse: (reply) => grammar.parse(reply),
    async view(page) {
      const parts: string[] = [];
      if (sees('text')) parts.push(await page.observe());
      if (sees('axtree')) parts.push(await page.axtree(AXTREE_MAX_LINES));
      // The ids drawn on a screenshot (and that id-speaking grammars name) are given as the page is walked.
      if (parts.length === 0) await page.observe();
      return parts.join('\n');
    },
    said(reply) {
      const call = reply.toolCalls?.[0];
      if (call && reply.text.trim() === '') return `${call.name} ${JSON.stringify(call.arguments ?? {})}`.slice(0, 120);
      return (reply.text.trim().split('\n')[0] ?? '').slice(0, 120);
    },
  };
}

/**
 * The pictures of one episode's page. The last one is taken before the page closes, so the state an episode
 * ended in can still be shown after it (the runner asks after the final step), once a picture was asked for.
 */
export class PageCamera {
  private wanted = false;
  private last: Uint8Array | null = null;

  constructor(private readonly markIds: boolean) {}

  /** The page now; null where the backend draws nothing (happy-dom), or the final picture once it closed. */
  async take(page: WebPage | undefined): Promise<Uint8Array | null> {
    this.wanted = true;
    if (!page) {
      const last = this.last;
      this.last = null;
      return last;
    }
    return page.screenshot ? page.screenshot(this.markIds) : null;
  }

  /** Called just before the page closes at the end of an episode. */
  async keepLast(page: WebPage, bounded: (call: () => Promise<Uint8Array>) => Promise<Uint8Array>): Promise<void> {
    if (!this.wanted || !page.screenshot) return;
    this.last = await bounded(() => page.screenshot!(this.markIds)).catch(() => null);
  }

  reset(): void {
    this.last = null;
  }
}
