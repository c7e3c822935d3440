/**
 * Instructions (c_t) through the HTTP API: `POST /evaluations` and `POST /runs` pin a name to its manifest
 * at creation (the episodes run under those documents however often the name is re-pushed), and answer
 * 400 at `instructions.name` / `instructions.manifest` for ones the store does not hold.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishInstructions } from '../../shared/instructions-catalog.ts';
import { keys } from '../../shared/keys.ts';
import { EvaluationView, RunConfig, StoredEvaluationRequest } from '../../shared/schemas/index.ts';
import { readJson } from '../../shared/store/json.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { startTestApi, tinyRunConfig, waitFor, type TestApi } from './helpers.ts';

let api: TestApi;
let store: FsObjectStore;
let endpoint: Server;
let baseUrl = '';
const systems: string[] = [];

beforeAll(async () => {
  api = await startTestApi();
  store = new FsObjectStore(api.storeRoot);
  endpoint = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const r = JSON.parse(body) as { model: string; messages: Array<{ role: string; content: string }> };
      systems.push(r.messages.find((m) => m.role === 'system')?.content ?? '');
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ id: 'x', object: 'chat.completion', model: r.model, choices: [{ index: 0, message: { role: 'assistant', content: 'place 1 1 1' }, finish_reason: 'stop' }], usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 } }));
    });
  });
  await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  await new Promise((resolve) => endpoint.close(resolve));
  await api?.dispose();
});

const OPTIONS = { size: 4, blanks: 2 };
const evaluation = (instructions: unknown) => ({
  model: { kind: 'external', baseUrl, model: 'theirs' },
  environment: { name: 'sudoku', options: OPTIONS },
  tasks: { split: 'eval', count: 2, seed: 1 },
  episodes: 2,
  concurrency: 1,
  instructions,
});

describe('instructions over the API', () => {
  it('400 at the field for instructions the store does not hold; nothing stored', async () => {
    const run = await api.call('POST', '/runs', { body: tinyRunConfig({ instructions: 'nobody' }) });
    expect(run.status).toBe(400);
    expect(run.body.error.issues.map((i: { path: string }) => i.path)).toEqual(['instructions.name']);
    const manifest = await api.call('POST', '/evaluations', { body: evaluation({ name: 'nobody', manifest: 'b'.repeat(64) }) });
    expect(manifest.status).toBe(400);
    expect(manifest.body.error.issues.map((i: { path: string }) => i.path)).toEqual(['instructions.manifest']);
    const rollout = await api.call('POST', '/evaluations', { body: { ...evaluation('coach'), model: { kind: 'base', model: { preset: 'tiny', seed: 0 } }, environment: { name: 'rollout', options: { url: 'http://127.0.0.1:9/rollout' } } } });
    expect(rollout.status).toBe(400);
    expect(rollout.body.error.issues.map((i: { path: string }) => i.path)).toEqual(['instructions']);
    const badName = await api.call('POST', '/evaluations', { body: evaluation('not a name!') });
    expect(badName.status).toBe(400);
    expect(await store.list('runs/')).toEqual([]);
    expect(await store.list('evaluations/')).toEqual([]);
  });

  it('pins at creation: the episodes run under the first push, the run config keeps its manifest', async () => {
    const first = (await publishInstructions(store, 'coach', { system: 'FIRST PUSH. {{environment}}', skills: [{ name: 'tip', text: 'Look twice.' }] })).record;
    const post = await api.call('POST', '/evaluations', { body: evaluation('coach') });
    expect(post.status).toBe(202);
    const run = await api.call('POST', '/runs', { body: tinyRunConfig({ instructions: 'coach', iterations: 1 }) });
    expect(run.status).toBe(201);
    await publishInstructions(store, 'coach', { system: 'SECOND PUSH.' });

    const pin = { name: 'coach', manifest: first.manifestSha256 };
    expect((await readJson(store, keys.evaluationRequest(post.body.id), StoredEvaluationRequest))?.instructions).toEqual(pin);
    expect((await readJson(store, keys.config(run.body.id), RunConfig))?.instructions).toEqual(pin);
    const view = await waitFor(async () => {
      const v = EvaluationView.parse((await api.call('GET', `/evaluations/${post.body.id}`)).body);
      return v.status.state === 'finished' || v.status.state === 'failed' ? v : undefined;
    }, 90_000, 'the evaluation');
    expect(view.status.state).toBe('finished');
    expect(systems.length).toBeGreaterThanOrEqual(2);
    for (const s of systems) {
      expect(s.startsWith('FIRST PUSH. ')).toBe(true);
      expect(s.endsWith('## Skill: tip\n\nLook twice.')).toBe(true);
    }
    await waitFor(async () => (['finished', 'failed'].includes((await api.call('GET', `/runs/${run.body.id}`)).body.status?.state) ? true : undefined), 90_000, 'the run');
  }, 180_000);
});
