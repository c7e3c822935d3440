/**
 * The API's door for environments that reach outside (rollout, OpenEnv, MCP): no request over HTTP starts a
 * program, endpoints are checked before anything is stored, and a rollout is evaluated only on esopt's own
 * inference server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestChoiceIssues } from '../../functions/http-api/request-choices.ts';
import { PUBLIC_ONLY } from '../../environments/outbound/address-policy.ts';
import { startTestApi, tinyRunConfig, type TestApi } from './helpers.ts';
import { pushTaskFolder } from '../../environments/web/task-folder-catalog.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';

const MINIWOB = new URL('../fixtures/miniwob-protocol', import.meta.url).pathname;

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(() => api.dispose());

describe('bring-your-own environments at the API', () => {
  it('refuses a command in environment options, locally too, naming the field', async () => {
    const res = await api.call('POST', '/runs', { body: tinyRunConfig({ environment: { name: 'rollout', options: { command: ['python3', 'agent.py'] } }, localEpisodes: 'worker-processes' }) });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain('environment.options.command');
    expect(JSON.stringify(res.body)).toMatch(/starts no program/);
  });

  it('finds a command nested in options (an MCP server list) and a url that is not allowed', () => {
    const issues = requestChoiceIssues({ environment: { name: 'tools', options: { mcp: { servers: [{ name: 'a', command: ['x'] }, { name: 'b', url: 'http://10.0.0.5/mcp' }] } } } }, true, PUBLIC_ONLY);
    expect(issues.map((i) => i.path)).toEqual(expect.arrayContaining(['environment.options.mcp.servers.0.command', 'environment.options.mcp.servers.1.url']));
  });

  it('refuses metadata, private and plain-http endpoints on a deployed stack, with the reason', () => {
    const cases: [string, RegExp][] = [
      ['https://169.254.169.254/latest', /never reachable/],
      ['https://10.1.2.3/rollout', /private address/],
      ['https://[::1]:8443/rollout', /loopback address/],
      ['http://agent.example.com/rollout', /use https/],
    ];
    for (const [url, reason] of cases) {
      const [issue] = requestChoiceIssues({ environment: { name: 'rollout', options: { url } } }, true, PUBLIC_ONLY);
      expect(issue?.path, url).toBe('environment.options.url');
      expect(issue?.message, url).toMatch(reason);
    }
    expect(requestChoiceIssues({ environment: { name: 'rollout', options: { url: 'https://agent.example.com/rollout' } } }, true, PUBLIC_ONLY)).toEqual([]);
    expect(requestChoiceIssues({ environment: { name: 'rollout', options: { url: 'https://agent.example.com/rollout' }, keyEnv: 'AGENT_KEY' } }, true, PUBLIC_ONLY).map((i) => i.path)).toEqual(['environment.keyEnv']);
  });

  it("checks a web app's origins and each task's start at the door, with the field path", async () => {
    const app = { url: 'https://app.example.com', alsoAllow: ['https://cdn.example.com', 'https://169.254.169.254'] };
    expect(requestChoiceIssues({ environment: { name: 'web', options: { app } } }, true, PUBLIC_ONLY).map((i) => i.path)).toEqual(['environment.options.app.alsoAllow.1']);
    expect(requestChoiceIssues({ environment: { name: 'web', options: { app: { url: 'https://10.0.0.7' } } } }, true, PUBLIC_ONLY).map((i) => i.path)).toEqual(['environment.options.app.url']);
    const task = (start: string) => ({ start, goal: 'Sign in.', check: { predicate: { path: '/url', matches: '/home$' } } });
    const evaluation = await api.call('POST', '/evaluations', {
      body: {
        model: { kind: 'external', baseUrl: 'https://api.example.com/v1', model: 'm' },
        environment: { name: 'web', options: { app: { url: 'http://127.0.0.1:9' } } },
        tasks: { tasks: [{ id: 'ok', task: task('/login') }, { id: 'away', task: task('https://elsewhere.example.com/login') }, { id: 'bad', task: { ...task('/x'), check: { predicate: { path: '/url', matches: '(?=x)' } } } }] },
        episodes: 3,
      },
    });
    expect(evaluation.status).toBe(400);
    const text = JSON.stringify(evaluation.body);
    expect(text).toContain('tasks.tasks.1.task');
    expect(text).toMatch(/not the app's origin/);
    expect(text).toContain('tasks.tasks.2.task.check.predicate');
    expect(text).not.toContain('tasks.tasks.0');
  });

  it('pins a pushed MiniWoB folder named in a run; an unknown folder or page is a 400 at its field, a path on a stack too', async () => {
    const { record } = await pushTaskFolder(new FsObjectStore(api.storeRoot), 'protocol', MINIWOB);
    const run = (miniwob: unknown) => api.call('POST', '/runs', { body: tinyRunConfig({ environment: { name: 'web', options: { backend: 'chromium', miniwob } }, iterations: 1 }) });
    const created = await run({ folder: 'protocol' });
    expect(created.status).toBe(201);
    await api.call('POST', `/runs/${created.body.id}/stop`);
    const config = (await api.call('GET', `/runs/${created.body.id}`)).body.config;
    expect(config.environment.options.miniwob).toMatchObject({ folder: { name: 'protocol', manifest: record.manifestSha256 }, tasks: ['click-word', 'click-word-short', 'draw-circle', 'type-word'] });
    const unknown = await run({ folder: 'nope' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.issues).toEqual([expect.objectContaining({ path: 'environment.options.miniwob.folder.name', message: expect.stringMatching(/esopt tasks push/) })]);
    const page = await run({ folder: 'protocol', tasks: ['book-flight'] });
    expect(page.body.error.issues).toEqual([expect.objectContaining({ path: 'environment.options.miniwob.tasks.0' })]);
    expect(requestChoiceIssues({ environment: { name: 'web', options: { miniwob: { dir: '/opt/miniwob' } } } }, true, PUBLIC_ONLY)).toEqual([
      expect.objectContaining({ path: 'environment.options.miniwob.dir', message: expect.stringMatching(/push the folder \(esopt tasks push DIR --name NAME --cloud\) and name it as miniwob.folder/) }),
    ]);
    expect(requestChoiceIssues({ environment: { name: 'web', options: { miniwob: { folder: 'protocol' } } } }, true, PUBLIC_ONLY)).toEqual([]);
  });

  it("refuses a screenshot view for esopt's own models (a run, a base model's evaluation), not for an external agent", () => {
    const web = { name: 'web', options: { observation: ['text', 'screenshot'] } };
    const own = requestChoiceIssues({ environment: web, model: { preset: 'tiny', seed: 0 } }, false);
    expect(own).toEqual([expect.objectContaining({ path: 'environment.options.observation', message: expect.stringMatching(/read text only/) })]);
    expect(requestChoiceIssues({ environment: web, model: { kind: 'base', model: { preset: 'tiny', seed: 0 } } }, false).map((i) => i.path)).toEqual(['environment.options.observation']);
    expect(requestChoiceIssues({ environment: web, model: { kind: 'external', baseUrl: 'https://api.example.com/v1', model: 'm', guidedDecoding: false, pricing: { usdPerMillionPromptTokens: 0, usdPerMillionCompletionTokens: 0 } } }, false)).toEqual([]);
  });

  it('accepts a rollout run naming a loopback agent locally, and refuses a rollout evaluation of an external model', async () => {
    const created = await api.call('POST', '/runs', { body: tinyRunConfig({ environment: { name: 'rollout', options: { url: 'http://127.0.0.1:9/rollout' } }, localEpisodes: 'worker-processes', iterations: 1 }) });
    expect(created.status).toBe(201);
    await api.call('POST', `/runs/${created.body.id}/stop`);
    const evaluation = await api.call('POST', '/evaluations', {
      body: { model: { kind: 'external', baseUrl: 'https://api.example.com/v1', model: 'm' }, environment: { name: 'rollout', options: { url: 'http://127.0.0.1:9/rollout' } }, tasks: { split: 'eval', count: 1 }, episodes: 1 },
    });
    expect(evaluation.status).toBe(400);
    expect(JSON.stringify(evaluation.body)).toContain('model.kind');
  });
});
