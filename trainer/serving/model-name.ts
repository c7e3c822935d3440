/**
 * Model names on the wire: `base` is θ itself, `member-<iteration>-<index>` a population member. A name
 * is resolved against the live population, so an episode of a finished iteration can never be served by
 * weights that have changed since (409), and a name that was never valid is 404. A member of an iteration
 * after the newest one this server has served is 503: a trainer replica learns of a new iteration a poll
 * after its coordinator, so the client retries (or fails over) instead of dropping the episode.
 */
import type { MemberSelector, Population } from '../engine/engine.ts';

export const BASE_MODEL = 'base';

export function memberModelName(iteration: number, index: number): string {
  return `member-${iteration}-${index}`;
}

export type Resolution = { ok: true; selector: MemberSelector } | { ok: false; status: 404 | 409 | 503; message: string };

const MEMBER_RE = /^member-(0|[1-9]\d{0,9})-(0|[1-9]\d{0,6})$/;

/** `newest`: the newest iteration this server has had live, if any. */
export function resolveModel(name: string, live: Population | null, newest: number | null = live?.iteration ?? null): Resolution {
  if (name === BASE_MODEL) return { ok: true, selector: { kind: 'base' } };
  const m = MEMBER_RE.exec(name);
  if (!m) return { ok: false, status: 404, message: `unknown model ${JSON.stringify(name)}: use "base" or "member-<iteration>-<index>"` };
  const iteration = Number(m[1]);
  const index = Number(m[2]);
  if (iteration > Math.max(live?.iteration ?? -1, newest ?? -1)) {
    return { ok: false, status: 503, message: `model ${name} belongs to iteration ${iteration}, which this server has not started yet` };
  }
  if (!live) {
    return { ok: false, status: 409, message: `model ${name} is not being served: no iteration is live (only "base" is)` };
  }
  if (iteration !== live.iteration) {
    return {
      ok: false,
      status: 409,
      message: `model ${name} belongs to iteration ${iteration}, which has finished; the live iteration is ${live.iteration} (its weights are not served any more)`,
    };
  }
  if (!live.members.some((mem) => mem.index === index)) {
    return { ok: false, status: 404, message: `unknown model ${name}: iteration ${iteration} has members 0-${live.members.length - 1}` };
  }
  return { ok: true, selector: { kind: 'member', iteration, index } };
}

/** Is this selector still servable under `live`? Checked again when a queued request reaches the engine. */
export function stillLive(selector: MemberSelector, live: Population | null): boolean {
  if (selector.kind === 'base') return true;
  return live !== null && live.iteration === selector.iteration && live.members.some((m) => m.index === selector.index);
}
