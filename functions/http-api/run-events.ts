/**
 * A run's progress as events, built by polling the store (so it works on any instance, in-process or on
 * Lambda): the status, each iteration starting (its manifest), rewards arriving, each update applied (its
 * metrics row) and each evaluation. A new subscriber first gets everything so far (or what follows its
 * cursor), then live changes; the sequence ends with `end` once the run is final.
 */
import { keys } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { EvaluationResult, MetricsRow, type RunEvent, type RunState } from '../../shared/schemas/index.ts';
import { readConfig, readCurrentIteration, readStatus, stopRequested } from './run-reader.ts';
import { readJson } from '../../shared/store/json.ts';

const FINAL: ReadonlySet<RunState> = new Set(['finished', 'stopped', 'failed']);

export interface RunEventOptions {
  pollMs: number;
  signal?: AbortSignal;
  /** Resume a stream: updates and evaluations up to these iterations were delivered already. */
  after?: EventCursor;
}

/**
 * How far a stream got: the last iteration whose update and whose evaluation it delivered (−1: none).
 * It travels as the SSE event id, so a client that reconnects with `Last-Event-ID` (as EventSource does,
 * and as a stream cut by a Lambda's response limit must) gets the rest without repeats. Status, iteration
 * and reward events describe the current state and are simply sent again.
 */
export interface EventCursor {
  row: number;
  evaluation: number;
}

export const START: EventCursor = { row: -1, evaluation: -1 };

export function formatEventId(c: EventCursor): string {
  return `${c.row}:${c.evaluation}`;
}

/** A `Last-Event-ID` this server wrote; anything else (absent, foreign, tampered) replays from the start. */
export function parseEventId(id: string | undefined): EventCursor {
  const m = /^(-1|\d{1,9}):(-1|\d{1,9})$/.exec(id?.trim() ?? '');
  return m ? { row: Number(m[1]), evaluation: Number(m[2]) } : START;
}

/** The cursor after `event`. */
export function advanceCursor(c: EventCursor, event: RunEvent): EventCursor {
  if (event.type === 'update-applied') return { ...c, row: Math.max(c.row, event.iteration) };
  if (event.type === 'evaluation') return { ...c, evaluation: Math.max(c.evaluation, event.iteration) };
  return c;
}

/** metrics/{k}.json and evaluations/{k}.json end in the zero-padded iteration. */
function iterationOfKey(key: string): number {
  return Number(/(\d{8,})\.json$/.exec(key)?.[1] ?? -1);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export async function* runEvents(store: ObjectStore, run: string, options: RunEventOptions): AsyncGenerator<RunEvent> {
  const config = await readConfig(store, run);
  const seen = new Set<string>();
  const after = options.after ?? START;
  let lastStatus = '';
  let started = -1;
  let arrivedAt = '';
  while (!options.signal?.aborted) {
    const [status, stop] = await Promise.all([readStatus(store, run), stopRequested(store, run)]);
    const statusJson = JSON.stringify([status, stop]);
    if (statusJson !== lastStatus) {
      lastStatus = statusJson;
      yield { type: 'status', status, stopRequested: stop };
    }

    const rowKeys = (await store.list(`${keys.run(run)}metrics/`)).filter((k) => k.endsWith('.json'));
    const evalKeys = (await store.list(`${keys.run(run)}evaluations/`)).filter((k) => k.endsWith('.json'));
    // Evaluations of θ_k come before iteration k's update in the loop, so interleave them in that order.
    const fresh = [
      ...evalKeys.filter((k) => !seen.has(k)).map((k) => ({ key: k, kind: 'evaluation' as const })),
      ...rowKeys.filter((k) => !seen.has(k)).map((k) => ({ key: k, kind: 'row' as const })),
    ].sort((a, b) => iterationOfKey(a.key) - iterationOfKey(b.key) || (a.kind === 'evaluation' ? -1 : 1));
    for (const { key, kind } of fresh) {
      seen.add(key);
      if (iterationOfKey(key) <= (kind === 'row' ? after.row : after.evaluation)) continue;
      if (kind === 'row') {
        const row = await readJson(store, key, MetricsRow);
        if (row) yield { type: 'update-applied', iteration: row.iteration, row };
      } else {
        const result = await readJson(store, key, EvaluationResult);
        if (result) yield { type: 'evaluation', iteration: result.iteration, result };
      }
    }
    const next = Math.max(-1, ...rowKeys.map(iterationOfKey)) + 1;
    const final = status !== null && FINAL.has(status.state);
    if (next < config.iterations && !final) {
      const current = await readCurrentIteration(store, run, next);
      if (current) {
        if (started !== next) {
          started = next;
          yield { type: 'iteration-started', iteration: next, expected: current.expected };
        }
        const tag = `${next}:${current.arrived}`;
        if (tag !== arrivedAt) {
          arrivedAt = tag;
          yield { type: 'rewards', iteration: next, arrived: current.arrived, expected: current.expected };
        }
      }
    }

    // A run started outside the API has no status: it is over once every row and the final evaluation are in.
    const outsideDone = status === null && rowKeys.length >= config.iterations && evalKeys.some((k) => k === keys.evaluationOf(run, config.iterations));
    if (final || outsideDone) {
      yield { type: 'end', state: status?.state ?? 'finished' };
      return;
    }
    await sleep(options.pollMs, options.signal);
  }
}
