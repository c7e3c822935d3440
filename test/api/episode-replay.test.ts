/**
 * Replays, result files and comparisons, store → route: evaluations whose episodes the real Episode handler
 * played on a page that draws a PNG each step (replay-fixture.ts), read back through the local API.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { canonicalSha256 } from '../../shared/canonical-json.ts';
import { keys } from '../../shared/keys.ts';
import { EpisodeReplay, EvaluationComparison, EvaluationResultFile, EvaluationView } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { StoredTranscript } from '../../functions/episode-transcript.ts';
import { colourAt, FRAME_SIZE, seedEvaluation, solidPng } from './replay-fixture.ts';
import { startTestApi, TOKEN, type TestApi } from './helpers.ts';

vi.mock(import('../../environments/index.ts'), async (original) => {
  const real = await original();
  const { counterDefinition } = await import('./counter-page.ts');
  return { ...real, loadEnvironment: async (name: string) => (name === 'web' ? counterDefinition : real.loadEnvironment(name)) } as typeof real;
});

const TASKS = [
  { id: 'count-to-2', task: { target: 2 } },
  { id: 'count-to-1', task: { target: 1 } },
];
const root = mkdtempSync(join(tmpdir(), 'esopt-replay-'));
const store = new FsObjectStore(root);
let api: TestApi;

beforeAll(async () => {
  // Prompt tokens priced so the good agent (more steps) costs more per episode than the bad one.
  await seedEvaluation(store, { id: 'eval-good', agent: 'good', tasks: TASKS, episodes: 2, usdPerMillionPromptTokens: 1000 });
  await seedEvaluation(store, { id: 'eval-bad', agent: 'bad', tasks: TASKS, episodes: 2, usdPerMillionPromptTokens: 1000 });
  await seedEvaluation(store, { id: 'eval-pricey', agent: 'bad', tasks: TASKS, episodes: 2, usdPerMillionPromptTokens: 3000 });
  await seedEvaluation(store, { id: 'eval-other', agent: 'good', tasks: [TASKS[0]!], episodes: 1, usdPerMillionPromptTokens: 1000 });
  api = await startTestApi(root, { gpuSecondsPerToken: 0 });
}, 60_000);

afterAll(async () => {
  await api?.dispose();
});

describe('GET /evaluations/{id}/episodes/{index}', () => {
  it('replays an episode step by step: observation, the action taken on it, and a frame route that serves that step\'s PNG', async () => {
    const res = await api.call('GET', '/evaluations/eval-good/episodes/0');
    expect(res.status).toBe(200);
    const replay = EpisodeReplay.parse(res.body);
    expect(replay).toMatchObject({ evaluation: 'eval-good', index: 0, task: 'count-to-2', round: 0, reward: 1, success: true, error: null, truncated: null, frames: { kept: 4, omitted: 0, reasons: [] } });
    expect(replay.system).toContain('Reply with one action');
    expect(replay.steps.map((s) => [s.step, s.observation, s.action?.text ?? null, s.error, s.done])).toEqual([
      [0, 'Counter: 0. Goal: make it 2, then submit.', 'next', null, false],
      [1, 'Counter: 1.', 'next', null, false],
      [2, 'Counter: 2.', 'submit', null, false],
      [3, 'Submitted 2.', null, null, true],
    ]);
    expect(replay.steps[3]!.reward).toBe(1);
    for (const s of replay.steps) {
      expect(s.frame).toBe(`/evaluations/eval-good/episodes/0/frames/${s.step}`);
      const png = await fetch(`${api.url}${s.frame}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(png.status).toBe(200);
      expect(png.headers.get('content-type')).toBe('image/png');
      // The very bytes the page drew at that state: the counter's value picks the colour.
      const count = Math.min(s.step, 2);
      expect(new Uint8Array(await png.arrayBuffer())).toEqual(solidPng(FRAME_SIZE.width, FRAME_SIZE.height, colourAt(count)));
    }
    expect((await api.call('GET', '/evaluations/eval-good')).body.episodes[0].transcript).toBe(replay.transcript);
  });

  it("shows the error an action met at the step it led to, and the episode's failure", async () => {
    const replay = EpisodeReplay.parse((await api.call('GET', '/evaluations/eval-bad/episodes/1')).body);
    expect(replay).toMatchObject({ task: 'count-to-1', reward: 0, success: false });
    expect(replay.steps.map((s) => [s.step, s.action?.text ?? null, s.error])).toEqual([
      [0, 'jump', null],
      [1, 'submit', 'no action "jump"'],
      [2, null, null],
    ]);
    expect(replay.steps[1]!.observation).toBe('Error: no action "jump". Counter: 0.');
  });

  it('protects frames with the token, and refuses bad or unknown episodes and steps', async () => {
    expect((await api.call('GET', '/evaluations/eval-good/episodes/0/frames/0', { token: null })).status).toBe(401);
    expect((await api.call('GET', '/evaluations/eval-good/episodes/0', { token: 'wrong-token-123456' })).status).toBe(401);
    const unknown = await api.call('GET', '/evaluations/eval-good/episodes/7');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
    const far = await api.call('GET', '/evaluations/eval-good/episodes/900000000000000/frames/0');
    expect([far.status, far.body.error.code]).toEqual([404, 'not_found']);
    const noStep = await api.call('GET', '/evaluations/eval-good/episodes/0/frames/9');
    expect([noStep.status, noStep.body.error.code]).toEqual([404, 'no_frame']);
    const bad = await api.call('GET', '/evaluations/eval-good/episodes/x');
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues.map((i: { path: string }) => i.path)).toEqual(['index']);
    expect((await api.call('GET', '/evaluations/nope/episodes/0')).status).toBe(404);
  });

  it("never serves a frame from outside the episode, whatever its transcript names", async () => {
    // Point eval-pricey's episode 0, step 0 at eval-good's real frame: the route must not follow it.
    const key = keys.transcript('eval-pricey', 0, 'base', 'count-to-2');
    const transcript = StoredTranscript.parse(JSON.parse(Buffer.from((await store.get(key))!).toString('utf8')));
    const goodFrame = (await store.list(keys.iteration('eval-good', 0))).find((k) => k.endsWith('/00000.png'))!;
    expect(goodFrame).toBeDefined();
    const own = await api.call('GET', '/evaluations/eval-pricey/episodes/0/frames/0');
    expect(own.status).toBe(200);
    const entries = transcript.entries.map((e) => (e.kind === 'observation' && e.step === 0 ? { ...e, frame: goodFrame } : e));
    await store.put(key, JSON.stringify({ ...transcript, entries }));
    const res = await api.call('GET', '/evaluations/eval-pricey/episodes/0/frames/0');
    expect([res.status, res.body.error.code]).toEqual([404, 'no_frame']);
    await store.put(key, JSON.stringify(transcript));
  });
});

describe('GET /evaluations/{id}/result', () => {
  it('names the suite by content, the judge and every task\'s outcome, agreeing with the evaluation\'s own summary', async () => {
    const res = await api.call('GET', '/evaluations/eval-good/result');
    expect(res.status).toBe(200);
    const file = EvaluationResultFile.parse(res.body);
    const view = EvaluationView.parse((await api.call('GET', '/evaluations/eval-good')).body);
    const taskHashes = TASKS.map((t) => ({ id: t.id, sha256: canonicalSha256(t.task) }));
    expect(file).toMatchObject({
      version: 1,
      evaluation: 'eval-good',
      state: 'finished',
      stopReason: 'completed',
      suite: { name: 'explicit tasks', manifest: null, environment: 'web', split: null, tasks: 2, tasksSha256: canonicalSha256(taskHashes) },
      judge: { environment: 'web', version: 1, successThreshold: 1 },
      environmentOptions: { observation: ['screenshot'] },
      instructions: null,
    });
    const { episodes, successes, failed, successRate, interval, meanReward, totalCostUsd, meanCostUsdPerEpisode } = view.summary;
    expect(file.summary).toEqual({ episodes, successes, failed, successRate, interval, meanReward, totalCostUsd, meanCostUsdPerEpisode });
    expect(file.tasks.map((t) => [t.id, t.sha256, t.episodes.map((e) => [e.index, e.success, e.steps, e.costUsd])])).toEqual([
      ['count-to-2', taskHashes[0]!.sha256, [[0, true, 3, view.episodes[0]!.cost.usd]]],
      ['count-to-1', taskHashes[1]!.sha256, [[1, true, 2, view.episodes[1]!.cost.usd]]],
    ]);
    // 3 and 2 replies of 100 prompt tokens at $1000 per million.
    expect(file.summary.meanCostUsdPerEpisode).toBeCloseTo(0.25, 9);
  });
});

describe('GET /evaluations/compare', () => {
  it('places each evaluation by success and cost per episode and marks the Pareto frontier', async () => {
    const res = await api.call('GET', '/evaluations/compare?ids=eval-pricey,eval-good,eval-bad');
    expect(res.status).toBe(200);
    const comparison = EvaluationComparison.parse(res.body);
    expect(comparison.evaluations.map((e) => [e.id, e.successRate, Number(e.meanCostUsdPerEpisode.toFixed(9)), e.frontier, e.dominatedBy])).toEqual([
      ['eval-pricey', 0, 0.6, false, ['eval-good', 'eval-bad']],
      ['eval-good', 1, 0.25, true, []],
      ['eval-bad', 0, 0.2, true, []],
    ]);
    expect(comparison.frontier).toEqual(['eval-bad', 'eval-good']);
    expect(comparison.judge).toEqual({ environment: 'web', version: 1, successThreshold: 1 });
    expect(comparison.evaluations[1]!.interval.low).toBeGreaterThan(0.15);
  });

  it('refuses evaluations of other tasks, naming which, and malformed id lists at ids', async () => {
    const res = await api.call('GET', '/evaluations/compare?ids=eval-good,eval-other');
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([{ path: 'ids.1', message: expect.stringContaining('eval-other played other tasks than eval-good') }]);
    const one = await api.call('GET', '/evaluations/compare?ids=eval-good');
    expect([one.status, one.body.error.issues[0].path]).toEqual([400, 'ids']);
    const malformed = await api.call('GET', '/evaluations/compare?ids=eval-good,../x');
    expect([malformed.status, malformed.body.error.issues[0].path]).toEqual([400, 'ids.1']);
    expect((await api.call('GET', '/evaluations/compare?ids=eval-good,eval-none')).status).toBe(404);
  });
});
