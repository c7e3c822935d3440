/**
 * Web evaluations a user asks for over HTTP: an external agent (trainer/dev/rehearsal/web-agent.ts, which the
 * deploy rehearsal uses too) evaluated on a small app of its own with a declarative check — in every view and
 * action grammar — and on a MiniWoB-protocol folder pushed to the store, with MiniWoB's own reward. Episodes
 * run in the local worker pool's real Chromium, each through the Episode function's code.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvaluationView, type EvaluationRequestInput } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { pushTaskFolder } from '../../environments/web/task-folder-catalog.ts';
import { startTodoApp, startWebAgent, type RehearsalApp, type WebAgent } from '../../trainer/dev/rehearsal/web-agent.ts';
import { startTestApi, waitFor, type TestApi } from './helpers.ts';

const chromium = existsSync('/usr/bin/chromium') || Boolean(process.env.ESOPT_CHROMIUM);
const MINIWOB = new URL('../fixtures/miniwob-protocol', import.meta.url).pathname;

let api: TestApi;
let app: RehearsalApp;
let agent: WebAgent;

beforeAll(async () => {
  api = await startTestApi();
  // The local API keeps no secrets, so this app wants no key (the deploy rehearsal's does).
  app = await startTodoApp();
  agent = await startWebAgent();
});
afterAll(async () => {
  await api?.dispose();
  await app?.close();
  await agent?.close();
});

async function finished(id: string): Promise<EvaluationView> {
  return waitFor(async () => {
    const view = EvaluationView.parse((await api.call('GET', `/evaluations/${id}`)).body);
    return view.status.state === 'finished' || view.status.state === 'failed' ? view : undefined;
  }, 120_000, `evaluation ${id}`);
}

const addMilk = { start: '/todos', goal: 'Add a to-do called "milk".', check: { elements: { items: '#items li' }, fetch: '/api/state', predicate: { all: [{ path: '/elements/items/text', equals: 'milk' }, { path: '/fetched/json/todos', includes: 'milk' }] } } };

function request(options: Record<string, unknown>, tasks: EvaluationRequestInput['tasks']): EvaluationRequestInput {
  return {
    model: { kind: 'external', baseUrl: agent.baseUrl, model: agent.model },
    environment: { name: 'web', options: { backend: 'chromium', actionTimeoutMs: 10_000, ...options } },
    tasks,
    episodes: 1,
    concurrency: 1,
    timeoutMs: 60_000,
  };
}

describe.skipIf(!chromium)('web evaluations over HTTP', () => {
  const VIEWS: [string, Record<string, unknown>][] = [
    ['esopt actions on the text view', {}],
    ['BrowserGym actions on the accessibility tree', { observation: ['axtree'], actions: 'browsergym' }],
    ['tool calls on text and tree', { observation: ['text', 'axtree'], actions: 'tools' }],
    ['coordinates on a screenshot with ids drawn', { observation: ['screenshot'], markIds: true, actions: 'coordinates' }],
  ];
  for (const [name, view] of VIEWS) {
    it(`an app of the user's, judged by its check: ${name}`, async () => {
      app.todos.length = 0;
      const pictures = agent.calls.pictures;
      const post = await api.call('POST', '/evaluations', { body: request({ app: { url: app.url, horizon: 6 }, ...view }, { tasks: [{ id: 'add-milk', task: addMilk }] }) });
      expect(post.status, JSON.stringify(post.body)).toBe(202);
      const done = await finished(post.body.id);
      expect(done.episodes).toHaveLength(1);
      expect(done.episodes[0]).toMatchObject({ success: true, error: null });
      expect(app.todos).toEqual(['milk']);
      expect(agent.calls.pictures > pictures).toBe(Boolean((view.observation as string[] | undefined)?.includes('screenshot')));
    }, 150_000);
  }

  it('a MiniWoB-protocol folder pushed to the store, served unmodified, with MiniWoB’s own reward', async () => {
    await pushTaskFolder(new FsObjectStore(api.storeRoot), 'protocol', MINIWOB);
    const post = await api.call('POST', '/evaluations', { body: request({ miniwob: { folder: 'protocol', tasks: ['click-word'] } }, { split: 'eval', count: 2, seed: 5 }) });
    expect(post.status).toBe(202);
    const done = await finished(post.body.id);
    expect(done.episodes.map((e) => [e.success, e.error])).toEqual([[true, null]]);
    const unknown = await api.call('POST', '/evaluations', { body: request({ miniwob: { folder: 'absent' } }, { split: 'eval', count: 1, seed: 5 }) });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.issues).toEqual([expect.objectContaining({ path: 'environment.options.miniwob.folder.name' })]);
  }, 150_000);
});
