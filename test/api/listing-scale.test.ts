/**
 * Listing at scale: with thousands of runs' objects in the store (configs, statuses, reward records, an
 * evaluation's records under `runs/` too), GET /runs and GET /evaluations answer a page from a delimiter
 * listing of their prefix, reading only the page's own items: never a listing of every object under
 * `runs/`, and within a time bound. Pages follow `next` to the end, each id once.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { EvaluationList, RunConfig, RunList } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { startTestApi, tinyRunConfig, type TestApi } from './helpers.ts';

const RUNS = 2000;
const EVALUATIONS = 300;
let api: TestApi;
const listed: string[] = [];

/** Written straight to the fs store's layout: thousands of objects in a second or two. */
function seed(root: string) {
  const put = (key: string, body: string) => {
    const path = join(root, ...key.split('/'));
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, body);
  };
  const config = JSON.stringify(RunConfig.parse(tinyRunConfig()));
  const at = new Date('2026-12-01T00:00:00Z').getTime();
  for (let i = 0; i < RUNS; i++) {
    const run = `run-${String(i).padStart(5, '0')}`;
    const time = new Date(at + i * 1000).toISOString();
    put(keys.config(run), config);
    put(keys.runStatus(run), JSON.stringify({ run, state: 'finished', requestedAt: time, startedAt: time, finishedAt: time, error: null, updatedAt: time }));
    for (let m = 0; m < 6; m++) put(keys.reward(run, 0, m, 'task-a'), '{}');
  }
  const request = {
    model: { kind: 'base', model: { preset: 'tiny', seed: 0 } },
    environment: { name: 'sudoku', options: { size: 4, blanks: 2 } },
    tasks: { split: 'eval', count: 2, seed: 1 },
    episodes: 2,
    concurrency: 1,
    generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 8 },
    timeoutMs: 30_000,
    budget: {},
  };
  for (let i = 0; i < EVALUATIONS; i++) {
    const id = `eval-${String(i).padStart(5, '0')}`;
    const time = new Date(at + i * 1000).toISOString();
    put(keys.evaluationRequest(id), JSON.stringify({ ...request, createdAt: time }));
    put(keys.evaluationStatus(id), JSON.stringify({ id, state: 'queued', stopReason: null, planned: 0, dispatched: 0, waves: 0, error: null, updatedAt: time, finishedAt: null }));
    // An evaluation's episode records live under runs/{id}/: not a run.
    put(keys.reward(id, 0, 'base', 'task-a'), '{}');
  }
}

beforeAll(async () => {
  const root = mkdtempSync(join(tmpdir(), 'esopt-listing-'));
  seed(root);
  const list = FsObjectStore.prototype.list;
  vi.spyOn(FsObjectStore.prototype, 'list').mockImplementation(function (this: FsObjectStore, prefix: string) {
    listed.push(prefix);
    return list.call(this, prefix);
  });
  api = await startTestApi(root);
}, 60_000);
afterAll(async () => {
  vi.restoreAllMocks();
  await api?.dispose();
});

it(`GET /runs answers a page of ${RUNS} runs quickly, never listing every object under runs/`, async () => {
  listed.length = 0;
  const started = performance.now();
  const first = await api.call('GET', '/runs?limit=50');
  const ms = performance.now() - started;
  expect(first.status).toBe(200);
  const page = RunList.parse(first.body);
  expect(page.runs).toHaveLength(50);
  expect(page.next).toBe('run-00049');
  // Newest first within the page.
  expect(page.runs[0].id).toBe('run-00049');
  expect(listed.filter((p) => p === 'runs/' || p === '' || p === 'runs')).toEqual([]);
  // Generous for a loaded 2-core machine; a read of every run took far longer, and its answer held all 2,000.
  expect(ms).toBeLessThan(4000);
});

it('follows next through every run once; evaluations are not runs; the default page is 100', async () => {
  const seen: string[] = [];
  for (let after: string | null = null, pages = 0; ; pages++) {
    expect(pages).toBeLessThan(10);
    const res = await api.call('GET', `/runs?limit=500${after ? `&after=${after}` : ''}`);
    const page = RunList.parse(res.body);
    seen.push(...page.runs.map((r) => r.id));
    if (page.next === null) break;
    after = page.next;
  }
  expect(seen).toHaveLength(RUNS);
  expect(new Set(seen).size).toBe(RUNS);
  expect(seen.some((id) => id.startsWith('eval-'))).toBe(false);
  expect(RunList.parse((await api.call('GET', '/runs')).body).runs).toHaveLength(100);
}, 60_000);

it('GET /evaluations pages the same way; a bad limit is a 400 naming it', async () => {
  const res = await api.call('GET', '/evaluations?limit=20&after=eval-00100');
  const page = EvaluationList.parse(res.body);
  expect(page.evaluations.map((e) => e.id)).toEqual(Array.from({ length: 20 }, (_, i) => `eval-${String(120 - i).padStart(5, '0')}`));
  expect(page.next).toBe('eval-00120');
  const bad = await api.call('GET', '/runs?limit=0');
  expect(bad.status).toBe(400);
  expect(JSON.stringify(bad.body)).toContain('limit');
});
