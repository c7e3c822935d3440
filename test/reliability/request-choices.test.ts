/**
 * Requests that would choose a program or a path on a deployed stack's machines, or send an endpoint key in
 * clear text (functions/http-api/request-choices.ts): each is refused with 400 and the field's path by the app
 * as the Api function builds it (queued launchers, `deployed`), and nothing is queued; so is a model that
 * was never pushed. A pushed one is pinned to its manifest. The local API, where the caller owns the
 * machine, still takes a program and a model directory.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { requestChoiceIssues } from '../../functions/http-api/request-choices.ts';
import { keys } from '../../shared/keys.ts';
import { RunConfig } from '../../shared/schemas/index.ts';
import { pushModel } from '../../trainer/training/model-store/push-model.ts';
import { tinyRunConfig } from '../api/helpers.ts';
import { apiOverTempStore } from './helpers/api-app.ts';

const TOKEN = 'request-choices-token-0123456789';
const GRID = fileURLToPath(new URL('../../models/sudoku-6x6-grid', import.meta.url));
const api = apiOverTempStore(TOKEN);
afterAll(() => api.dispose());

const post = async (path: string, body: unknown) => {
  const res = await api.app.request(path, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as { error?: { issues?: Array<{ path: string; message: string }> } } };
};
const paths = (r: Awaited<ReturnType<typeof post>>) => (r.body.error?.issues ?? []).map((i) => i.path);

const web = (options: Record<string, unknown>) => ({ name: 'web' as const, options: { backend: 'chromium', ...options } });
const evaluation = (model: unknown, environment: unknown = { name: 'sudoku', options: { size: 4 } }) => ({ model, environment, tasks: { split: 'eval', count: 1 }, episodes: 1 });

describe('what a request may not choose on a deployed stack', () => {
  const hostile: Array<[string, string, unknown, string]> = [
    ['a run that names the browser program', '/runs', tinyRunConfig({ environment: web({ executablePath: '/bin/sh' }) }), 'environment.options.executablePath'],
    ['a run whose model is a directory on the box', '/runs', tinyRunConfig({ model: { dir: '/etc' } }), 'model.dir'],
    ['an evaluation that names the browser program', '/evaluations', evaluation({ kind: 'external', baseUrl: 'https://agent.example.com/v1', model: 'm' }, web({ executablePath: '/usr/bin/env' })), 'environment.options.executablePath'],
    ['a base evaluation of a directory on the box', '/evaluations', evaluation({ kind: 'base', model: { dir: '/root' } }), 'model.model.dir'],
    ['a run whose model dir climbs out of the shipped models', '/runs', tinyRunConfig({ model: { dir: 'models/../../../etc' } }), 'model.dir'],
    ['a run of a model directory the tree ships', '/runs', tinyRunConfig({ model: { dir: 'models/sudoku-6x6-grid' } }), 'model.dir'],
    ['a run of a model nobody pushed', '/runs', tinyRunConfig({ model: { name: 'nobody' } }), 'model.name'],
    ['a run pinned to a manifest the store lacks', '/runs', tinyRunConfig({ model: { name: 'grid', manifest: 'f'.repeat(64) } }), 'model.manifest'],
    ['a base evaluation of a model nobody pushed', '/evaluations', evaluation({ kind: 'base', model: { name: 'nobody' } }), 'model.model.name'],
    ['a keyed evaluation of a plain-http endpoint', '/evaluations', evaluation({ kind: 'external', baseUrl: 'http://agent.example.com/v1', model: 'm', apiKey: 'sk-secret-0123' }), 'model.baseUrl'],
  ];
  for (const [what, path, body, field] of hostile) {
    it(`refuses ${what}: 400 naming ${field}, nothing queued`, async () => {
      const before = (await api.store.list(keys.workQueue())).length;
      const r = await post(path, body);
      expect(r.status).toBe(400);
      expect(paths(r)).toEqual([field]);
      expect((await api.store.list(keys.workQueue())).length).toBe(before);
    });
  }

  it('points a model directory at esopt models push', async () => {
    const r = await post('/runs', tinyRunConfig({ model: { dir: 'models/sudoku-6x6-grid' } }));
    expect(r.body.error?.issues?.[0]?.message).toMatch(/esopt models push DIR --cloud/);
  });

  it('takes what names nothing on the host: a preset or a pushed model, the web option left out, a keyed https or loopback endpoint, an unkeyed http one', async () => {
    expect((await post('/runs', tinyRunConfig({ environment: web({}) }))).status).toBe(201);
    for (const baseUrl of ['https://agent.example.com/v1', 'http://127.0.0.1:9/v1', 'http://localhost:9/v1']) {
      expect((await post('/evaluations', evaluation({ kind: 'external', baseUrl, model: 'm', apiKey: 'sk-secret-0123' }))).status, baseUrl).toBe(202);
    }
    expect((await post('/evaluations', evaluation({ kind: 'external', baseUrl: 'http://agent.example.com/v1', model: 'm' }))).status).toBe(202);
  });

  it('pins a pushed model to its manifest in what it stores, run and base evaluation alike', async () => {
    const { manifestSha256 } = await pushModel(api.store, GRID, { name: 'grid' });
    const created = await post('/runs', tinyRunConfig({ model: { name: 'grid' } }));
    expect(created.status).toBe(201);
    const id = (created.body as unknown as { id: string }).id;
    const config = RunConfig.parse(JSON.parse(new TextDecoder().decode((await api.store.get(keys.config(id)))!)));
    expect(config.model).toEqual({ name: 'grid', manifest: manifestSha256 });
    // A manifest the store has is taken as given.
    expect((await post('/runs', tinyRunConfig({ model: { name: 'grid', manifest: manifestSha256 } }))).status).toBe(201);
    const evaluated = await post('/evaluations', evaluation({ kind: 'base', model: { name: 'grid' } }));
    expect(evaluated.status).toBe(202);
    const request = JSON.parse(new TextDecoder().decode((await api.store.get(keys.evaluationRequest((evaluated.body as unknown as { id: string }).id)))!));
    expect(request.model).toEqual({ kind: 'base', model: { name: 'grid', manifest: manifestSha256 } });
  });

  it('leaves a program and a model directory to the local API, where the caller owns the machine; the key rule holds there too', () => {
    expect(requestChoiceIssues({ environment: web({ executablePath: '/usr/bin/chromium' }), model: { dir: 'models/mine' } }, false)).toEqual([]);
    expect(requestChoiceIssues({ environment: { name: 'sudoku' }, model: { kind: 'external', baseUrl: 'http://agent.example.com/v1', model: 'm', apiKey: 'k', guidedDecoding: false, pricing: { usdPerMillionPromptTokens: 0, usdPerMillionCompletionTokens: 0 } } }, false).map((i) => i.path)).toEqual(['model.baseUrl']);
  });
});
