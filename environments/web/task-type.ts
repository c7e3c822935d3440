/** A web task type: a seeded generator of one page (markup, its judging script, the goal) and its oracle plan. */
import type { SeededRandom } from '../random.ts';
import type { PageView } from './page-view.ts';

export interface TaskPage {
  title: string;
  /** The instruction the agent is given (shown above the page view). */
  goal: string;
  /** Markup of the page body. */
  body: string;
  /** Page script: sees `DATA` and `finish(success)`, and judges the episode itself. */
  script: string;
  /** JSON-serialisable data for the page script. */
  data: unknown;
}

/** One move of the oracle: an action, and whether its plan step is complete. `null`: the step is already satisfied. */
export type OracleMove = { action: string; advance: boolean } | null;
export type OracleStep = (view: PageView) => OracleMove;

export interface GeneratedTask {
  page: TaskPage;
  /** The scripted solution, resolved against the live view step by step. */
  plan: OracleStep[];
}

export interface WebTaskType {
  readonly name: string;
  /** Maximum actions per episode. */
  readonly horizon: number;
  generate(random: SeededRandom): GeneratedTask;
}

/** Escapes text for HTML content and attribute values. */
export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}
