/**
 * The Event fan-out's wrapper settles a request when its record is listed, when the dispatch is
 * cancelled, or at once when the caller says it has read every record (`recordsIn`): the loop, whose
 * collection lists more often, must not wait for the wrapper's next listing after its last record.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEnvironment } from '../../environments/index.ts';
import { keys } from '../../shared/keys.ts';
import type { DispatchOutcome, Fanout } from '../../shared/ports/fanout.ts';
import type { EpisodeRequest } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { iterationRequests } from '../../trainer/fanout/iteration-requests.ts';
import { RecordAwaitingFanout } from '../../trainer/fanout/record-awaiting.ts';

/** What Lambda's Event invoke answers: accepted, the record still to come through the store. */
const acceptsAll: Fanout = {
  dispatch: async (requests): Promise<DispatchOutcome[]> => requests.map((request) => ({ request, ok: true })),
  close: async () => {},
};

let root: string;
let store: FsObjectStore;
let requests: EpisodeRequest[];
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'esopt-record-awaiting-'));
  store = new FsObjectStore(root);
  const sudoku = await loadEnvironment('sudoku');
  const options = sudoku.optionsSchema.parse({ size: 4 });
  requests = iterationRequests({
    run: 'awaiting',
    iteration: 0,
    runSeed: 1,
    members: [0, 1],
    tasks: sudoku.sampleTasks('train', 2, 1, options),
    environment: { name: 'sudoku', options: { size: 4 } },
    policy: { baseUrl: 'scripted:oracle' },
    generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 16 },
    deadline: new Date(Date.now() + 3_600_000),
  });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const settledWithin = (p: Promise<unknown>, ms: number) => Promise.race([p.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]);

describe('RecordAwaitingFanout', () => {
  it('waits for the records, and settles at once, every request ok, when the caller has read them all', async () => {
    const recordsIn = new AbortController();
    const started = Date.now();
    const dispatching = new RecordAwaitingFanout(acceptsAll, store, 10_000).dispatch(requests, { concurrency: 4, timeoutMs: 60_000, recordsIn: recordsIn.signal });
    expect(await settledWithin(dispatching, 300)).toBe(false);
    recordsIn.abort();
    expect(await settledWithin(dispatching, 1_000)).toBe(true);
    expect(Date.now() - started).toBeLessThan(5_000);
    const outcomes = await dispatching;
    expect(outcomes.map((o) => [o.ok, o.timedOut ?? false])).toEqual(requests.map(() => [true, false]));
  });

  it('without that word, settles when its own listing finds every record', async () => {
    const dispatching = new RecordAwaitingFanout(acceptsAll, store, 20).dispatch(requests, { concurrency: 4, timeoutMs: 60_000 });
    expect(await settledWithin(dispatching, 200)).toBe(false);
    for (const r of requests) await store.put(keys.reward(r.run, r.iteration, r.member, r.task.id), '{}');
    expect(await settledWithin(dispatching, 2_000)).toBe(true);
    expect((await dispatching).every((o) => o.ok)).toBe(true);
  });

  it('a cancelled dispatch reports the requests still without a record as timed out', async () => {
    const signal = new AbortController();
    const others = requests.map((r) => ({ ...r, run: 'awaiting-cancelled' }));
    const dispatching = new RecordAwaitingFanout(acceptsAll, store, 10_000).dispatch(others, { concurrency: 4, timeoutMs: 60_000, signal: signal.signal });
    signal.abort();
    const outcomes = await dispatching;
    expect(outcomes.every((o) => !o.ok && o.timedOut === true)).toBe(true);
  });
});
