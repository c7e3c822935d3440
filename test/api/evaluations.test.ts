/**
 * Pay-per-episode evaluations: an external OpenAI-compatible agent on loopback (with its own key and
 * token prices) evaluated through the local worker pool, budgets that stop it early, and the base model
 * served by the local model host. Every number is checked against what the agent itself saw.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { EvaluationView, type EvaluationRequestInput } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { StoredTranscript } from '../../functions/episode-transcript.ts';
import { startAgentServer, type AgentServer } from './agent-server.ts';
import { startTestApi, tinyRunConfig, waitFor, type TestApi } from './helpers.ts';

const KEY = 'sk-agent-7d1e';
const OPTIONS = { size: 4, blanks: 2 } as const;
const TASKS = sudoku.sampleTasks('eval', 4, 3, sudoku.optionsSchema.parse(OPTIONS));
const PRICING = { usdPerMillionPromptTokens: 3000, usdPerMillionCompletionTokens: 15000 };
/** The agent solves the tasks at even positions of the task list. */
const solved = new Set(TASKS.filter((_, i) => i % 2 === 0).map((t) => t.id));

let api: TestApi;
let agent: AgentServer;

function externalRequest(overrides: Partial<EvaluationRequestInput> = {}): EvaluationRequestInput {
  return {
    model: { kind: 'external', baseUrl: agent.baseUrl, model: 'their-agent-v2', apiKey: KEY, pricing: PRICING },
    environment: { name: 'sudoku', options: OPTIONS },
    tasks: { split: 'eval', count: 4, seed: 3 },
    episodes: 6,
    concurrency: 2,
    timeoutMs: 30_000,
    ...overrides,
  };
}

async function finished(id: string): Promise<EvaluationView> {
  return waitFor(async () => {
    const view = EvaluationView.parse((await api.call('GET', `/evaluations/${id}`)).body);
    return view.status.state === 'finished' || view.status.state === 'failed' ? view : undefined;
  }, 90_000, `evaluation ${id}`);
}

/** Wilson's 95% interval, written out here independently of shared/wilson.ts. */
function wilson(k: number, n: number): { low: number; high: number } {
  const z = 1.959963984540054;
  const p = k / n;
  const centre = p + (z * z) / (2 * n);
  const spread = z * Math.sqrt((p * (1 - p) + (z * z) / (4 * n)) / n);
  const d = 1 + (z * z) / n;
  return { low: (centre - spread) / d, high: (centre + spread) / d };
}

const usdOf = (tokens: { prompt: number; completion: number }) => (tokens.prompt * PRICING.usdPerMillionPromptTokens + tokens.completion * PRICING.usdPerMillionCompletionTokens) / 1e6;

beforeAll(async () => {
  api = await startTestApi();
  agent = await startAgentServer(KEY, TASKS, (id) => solved.has(id));
});

afterAll(async () => {
  await api?.dispose();
  await agent?.close();
});

describe('evaluating an external OpenAI-compatible endpoint', () => {
  let view: EvaluationView;

  it('stops at maxEpisodes and says so; every number matches what the agent saw', async () => {
    const post = await api.call('POST', '/evaluations', { body: externalRequest({ budget: { maxEpisodes: 5 } }), headers: { 'idempotency-key': 'eval-1' } });
    expect(post.status).toBe(202);
    view = await finished(post.body.id);

    expect(view.status).toMatchObject({ state: 'finished', stopReason: 'max-episodes', planned: 5, dispatched: 5 });
    expect(view.summary.stopReason).toBe('max-episodes');
    expect(view.summary.note).toContain('stopped early');
    // Episode i plays task i mod 4 in round ⌊i/4⌋.
    expect(view.episodes.map((e) => [e.index, e.task, e.round])).toEqual([0, 1, 2, 3, 4].map((i) => [i, TASKS[i % 4].id, Math.floor(i / 4)]));
    expect(view.episodes.map((e) => e.success)).toEqual([true, false, true, false, true]);
    expect(view.episodes.every((e) => e.error === null && e.steps >= 1)).toBe(true);
    expect(view.summary).toMatchObject({ episodes: 5, successes: 3, failed: 0, successRate: 0.6 });
    const expected = wilson(3, 5);
    expect(view.summary.interval.low).toBeCloseTo(expected.low, 12);
    expect(view.summary.interval.high).toBeCloseTo(expected.high, 12);

    // The key reached the agent (never the store), and the tokens and costs are the agent's own usage.
    expect(agent.unauthorized).toBe(0);
    const agentTokens = agent.calls.reduce((a, c) => ({ prompt: a.prompt + c.promptTokens, completion: a.completion + c.completionTokens }), { prompt: 0, completion: 0 });
    const tokens = view.episodes.reduce((a, e) => ({ prompt: a.prompt + e.tokens.prompt, completion: a.completion + e.tokens.completion }), { prompt: 0, completion: 0 });
    expect(tokens).toEqual(agentTokens);
    for (const e of view.episodes) {
      expect(e.cost.usd).toBeCloseTo(usdOf(e.tokens), 12);
      expect(e.cost.gpuSeconds).toBe(0);
    }
    expect(view.summary.totalCostUsd).toBeCloseTo(usdOf(agentTokens), 12);
    expect(view.summary.meanCostUsdPerEpisode).toBeCloseTo(usdOf(agentTokens) / 5, 12);
    expect(view.request.model).toMatchObject({ kind: 'external', hasApiKey: true });
    expect(JSON.stringify(view)).not.toContain(KEY);
    expect((await api.call('GET', '/evaluations')).body.evaluations.map((e: { id: string }) => e.id)).toContain(view.id);
  });

  it('links each episode\'s transcript as the worker stored it, and only from the evaluation\'s own prefix', async () => {
    const store = new FsObjectStore(api.storeRoot);
    const [first, second] = view.episodes;
    // The worker stored every episode's transcript and named it in the record: the agent's own replies, in order.
    for (const episode of view.episodes) expect(episode.transcript).toBe(`/evaluations/${view.id}/episodes/${episode.index}/transcript`);
    const got = await api.call('GET', first.transcript as string);
    expect(got.status).toBe(200);
    const transcript = StoredTranscript.parse(got.body);
    expect(transcript).toMatchObject({ run: view.id, iteration: first.round, member: 'base', task: first.task, truncated: null });
    const actions = transcript.entries.filter((e) => e.kind === 'action');
    expect(actions).toHaveLength(first.steps);
    expect(actions.reduce((n, e) => n + (e.kind === 'action' ? e.tokens.completion : 0), 0)).toBe(first.tokens.completion);

    const recordKey = keys.reward(view.id, second.round, 'base', second.task);
    const record = JSON.parse(new TextDecoder().decode((await store.get(recordKey)) as Uint8Array));
    expect(record.transcriptKey).toBe(keys.transcript(view.id, second.round, 'base', second.task));
    await store.put(recordKey, JSON.stringify({ ...record, transcriptKey: null }));
    const now = EvaluationView.parse((await api.call('GET', `/evaluations/${view.id}`)).body);
    expect(now.episodes[1].transcript).toBeNull();
    expect(await api.call('GET', `/evaluations/${view.id}/episodes/${second.index}/transcript`)).toMatchObject({ status: 404, body: { error: { code: 'no_transcript' } } });
    expect(await api.call('GET', `/evaluations/${view.id}/episodes/99/transcript`)).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    await store.put(recordKey, JSON.stringify({ ...record, transcriptKey: keys.config('someone-else') }));
    expect((await api.call('GET', `/evaluations/${view.id}/episodes/${second.index}/transcript`)).status).toBe(404);
    await store.put(recordKey, JSON.stringify(record));
  });

  it('the same Idempotency-Key and body give the same evaluation; another body is refused', async () => {
    const again = await api.call('POST', '/evaluations', { body: externalRequest({ budget: { maxEpisodes: 5 } }), headers: { 'idempotency-key': 'eval-1' } });
    expect(again).toMatchObject({ status: 202, body: { id: view.id } });
    const other = await api.call('POST', '/evaluations', { body: externalRequest({ budget: { maxEpisodes: 4 } }), headers: { 'idempotency-key': 'eval-1' } });
    expect(other.status).toBe(422);
    expect((await api.call('GET', '/evaluations')).body.evaluations).toHaveLength(1);
  });

  it('stops when the cost budget would be passed, and says so', async () => {
    const mean = view.summary.meanCostUsdPerEpisode as number;
    const maxCostUsd = mean * 3.5;
    const post = await api.call('POST', '/evaluations', { body: externalRequest({ episodes: 40, concurrency: 3, budget: { maxCostUsd } }) });
    const costly = await finished(post.body.id);
    expect(costly.status.stopReason).toBe('max-cost');
    expect(costly.summary.note).toContain('cost budget');
    expect(costly.episodes.length).toBeGreaterThanOrEqual(2);
    expect(costly.episodes.length).toBeLessThan(40);
    // It stopped because one more episode at the mean cost would not fit, and it never ran far past the budget.
    const spent = costly.summary.totalCostUsd;
    expect(spent + (costly.summary.meanCostUsdPerEpisode as number)).toBeGreaterThan(maxCostUsd);
    expect(spent).toBeLessThan(maxCostUsd * 1.5);
    // The first wave is one episode (to learn the price), then waves of at most `concurrency`.
    expect(costly.status.waves).toBeGreaterThanOrEqual(2);
  });

  it('a wrong key fails every episode with the endpoint\'s error, recorded per episode', async () => {
    const before = agent.unauthorized;
    const post = await api.call('POST', '/evaluations', {
      body: externalRequest({ model: { kind: 'external', baseUrl: agent.baseUrl, model: 'their-agent-v2', apiKey: 'sk-wrong' }, episodes: 2, concurrency: 1 }),
    });
    const bad = await finished(post.body.id);
    expect(bad.status).toMatchObject({ state: 'finished', stopReason: 'completed' });
    expect(bad.episodes).toHaveLength(2);
    for (const e of bad.episodes) expect(e.error).toMatch(/401/);
    expect(bad.summary).toMatchObject({ successes: 0, failed: 2, successRate: 0 });
    expect(agent.unauthorized).toBeGreaterThan(before);
  });
});

describe('POST /evaluations errors', () => {
  it('400 names every failing field, including the environment\'s own task schema', async () => {
    const bad = await api.call('POST', '/evaluations', { body: { ...externalRequest(), episodes: 0, model: { kind: 'external', baseUrl: 'not a url', model: 'm' } } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues.map((i: { path: string }) => i.path)).toEqual(expect.arrayContaining(['episodes', 'model.baseUrl']));

    const tasks = await api.call('POST', '/evaluations', {
      body: externalRequest({ tasks: { tasks: [{ id: 'a', task: { puzzle: '12', size: 4 } }, { id: 'a', task: TASKS[0].task }] } }),
    });
    expect(tasks.status).toBe(400);
    expect(tasks.body.error.issues.map((i: { path: string }) => i.path)).toEqual(['tasks.tasks.0.task.puzzle', 'tasks.tasks.1.id']);

    const env = await api.call('POST', '/evaluations', { body: externalRequest({ environment: { name: 'sudoku', options: { size: 7 } } }) });
    expect(env.body.error.issues[0].path).toBe('environment.options.size');
  });

  it('404 for unknown evaluations, episodes and runs; 422 for a run without a checkpoint', async () => {
    expect((await api.call('GET', '/evaluations/eval-nope')).status).toBe(404);
    expect((await api.call('GET', `/evaluations/${'x'.repeat(65)}`)).status).toBe(400);
    const checkpointOfNothing = await api.call('POST', '/evaluations', { body: externalRequest({ model: { kind: 'checkpoint', run: 'no-such-run' } }) });
    expect(checkpointOfNothing.status).toBe(404);
    // A run that has not written a checkpoint yet: its config is all there is.
    await new FsObjectStore(api.storeRoot).put(keys.config('young-run'), JSON.stringify(tinyRunConfig()));
    const young = await api.call('POST', '/evaluations', { body: externalRequest({ model: { kind: 'checkpoint', run: 'young-run' } }) });
    expect(young).toMatchObject({ status: 422, body: { error: { code: 'no_checkpoint' } } });
  });
});

describe('evaluating our own base model', () => {
  it('serves θ_0 of the tiny preset through the local model host; its episodes pay the GPU share', async () => {
    const post = await api.call('POST', '/evaluations', {
      body: { model: { kind: 'base', model: { preset: 'tiny', seed: 0 } }, environment: { name: 'sudoku', options: OPTIONS }, tasks: { tasks: [{ id: TASKS[1].id, task: TASKS[1].task }] }, episodes: 2, concurrency: 1, generation: { maxTokens: 8 } },
    });
    expect(post.status).toBe(202);
    const base = await finished(post.body.id);
    expect(base.status).toMatchObject({ state: 'finished', stopReason: 'completed' });
    expect(base.episodes.map((e) => e.round)).toEqual([0, 1]);
    for (const e of base.episodes) {
      expect(e.tokens.completion).toBeGreaterThan(0);
      expect(e.cost.gpuSeconds).toBeGreaterThan(0);
      expect(e.cost.usd).toBeGreaterThan(0);
    }
  });
});
