/**
 * A held-out evaluation has no quorum: every episode counts, so none may fail only because it waited for
 * a worker. With `workers` at a time, each request's deadline leaves the run's per-episode allowance to
 * the last wave (a run on a loaded machine lost 14 of 128 held-out episodes to the old fixed deadline).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import type { DispatchOutcome, Fanout } from '../../shared/ports/fanout.ts';
import { RewardRecord, RunConfig, type EpisodeRequest } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { evaluate } from '../../trainer/training/loop/evaluation.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-eval-deadline-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Records what it was sent and writes each episode's record at once (a solved task). */
class RecordingFanout implements Fanout {
  readonly sent: EpisodeRequest[] = [];
  constructor(private readonly store: FsObjectStore) {}
  async dispatch(requests: EpisodeRequest[]): Promise<DispatchOutcome[]> {
    this.sent.push(...requests);
    for (const r of requests) {
      const record = RewardRecord.parse({ run: r.run, iteration: r.iteration, member: r.member, task: r.task.id, reward: 1, steps: 1, tokens: { prompt: 1, completion: 1 }, durations: { episodeMs: 1, inferenceMs: 1 }, cost: { usd: 0, lambdaGbSeconds: 0, gpuSeconds: 0 }, error: null, writtenAt: new Date().toISOString() });
      await this.store.put(keys.reward(r.run, r.iteration, r.member, r.task.id), JSON.stringify(record), { ifAbsent: true });
    }
    return requests.map((request) => ({ request, ok: true }));
  }
  async close() {}
}

describe('evaluation deadlines', () => {
  it('give every held-out episode the per-episode allowance after the workers reach it', async () => {
    const config = RunConfig.parse({ environment: { name: 'sudoku' }, model: { preset: 'tiny' }, es: { population: 2, sigma: 0.1, alpha: 0.1 }, iterations: 1, deadlineMs: 10_000, workers: 4 });
    const tasks = Array.from({ length: 10 }, (_, i) => ({ id: `t${i}`, task: { i } }));
    const store = new FsObjectStore(join(root, 'a'));
    const fanout = new RecordingFanout(store);
    const started = Date.now();
    const result = await evaluate({ store, fanout, run: 'r', config, iteration: 0, thetaHash: 'h', tasks, policy: { baseUrl: 'http://127.0.0.1:9/v1' }, pollMs: 5 });
    expect(result.successes).toBe(10);
    expect(fanout.sent).toHaveLength(10);
    // 10 episodes, 4 at a time: the third wave starts two allowances in and still gets a whole one.
    for (const r of fanout.sent) expect(Date.parse(r.deadline) - started).toBeGreaterThanOrEqual(3 * 10_000);
    expect(Date.parse(fanout.sent[0].deadline) - Date.now()).toBeLessThanOrEqual(3 * 10_000);
  });

  it('count only the episodes still missing when an evaluation is resumed', async () => {
    const config = RunConfig.parse({ environment: { name: 'sudoku' }, model: { preset: 'tiny' }, es: { population: 2, sigma: 0.1, alpha: 0.1 }, iterations: 1, deadlineMs: 10_000, workers: 4 });
    const tasks = Array.from({ length: 10 }, (_, i) => ({ id: `t${i}`, task: { i } }));
    const store = new FsObjectStore(join(root, 'b'));
    await new RecordingFanout(store).dispatch(
      tasks.slice(0, 7).map((t) => ({ run: 'r', iteration: 0, member: 'base', task: { id: t.id, value: t.task }, environment: { name: 'sudoku', options: {} }, policy: { baseUrl: 'http://127.0.0.1:9/v1', model: 'base' }, generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 8 }, seed: 0, deadline: new Date().toISOString() })),
    );
    const fanout = new RecordingFanout(store);
    const started = Date.now();
    await evaluate({ store, fanout, run: 'r', config, iteration: 0, thetaHash: 'h', tasks, policy: { baseUrl: 'http://127.0.0.1:9/v1' }, pollMs: 5 });
    expect(fanout.sent.map((r) => r.task.id)).toEqual(['t7', 't8', 't9']);
    // Three missing, four workers: one wave.
    for (const r of fanout.sent) expect(Date.parse(r.deadline) - started).toBeLessThanOrEqual(10_000 + 1000);
  });
});
