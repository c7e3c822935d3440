/**
 * The API commands of the esopt CLI against a real local API: runs start|list|show|watch|stop|resume and
 * evals start|show, each with --json, token from ESOPT_TOKEN, --api naming the server.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { extract } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashTheta } from '../../shared/theta-hash.ts';
import { loadModelDir } from '../../trainer/engine/model/model-dir.ts';
import { RunEvent } from '../../shared/schemas/index.ts';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { main } from '../../trainer/cli/main.ts';
import { startAgentServer, type AgentServer } from './agent-server.ts';
import { startTestApi, tinyRunConfig, TOKEN, type TestApi } from './helpers.ts';

let api: TestApi;
let agent: AgentServer;
const dir = mkdtempSync(join(tmpdir(), 'esopt-cli-api-'));
const TASKS = sudoku.sampleTasks('eval', 2, 9, sudoku.optionsSchema.parse({ size: 4, blanks: 2 }));

async function esopt(...argv: string[]) {
  let out = '';
  let err = '';
  const io = { stdout: (t: string) => void (out += `${t}\n`), stderr: (t: string) => void (err += `${t}\n`), readStdin: async () => '' };
  const code = await main([...argv, '--api', api.url], io);
  return { code, out, err };
}

beforeAll(async () => {
  process.env.ESOPT_TOKEN = TOKEN;
  api = await startTestApi();
  agent = await startAgentServer('sk-cli', TASKS, () => true);
});

afterAll(async () => {
  delete process.env.ESOPT_TOKEN;
  delete process.env.AGENT_KEY;
  await api?.dispose();
  await agent?.close();
});

describe('esopt runs', () => {
  it('start → watch (--json events to the end) → list → show', async () => {
    const configPath = join(dir, 'run.json');
    writeFileSync(configPath, JSON.stringify(tinyRunConfig({ name: 'cli' })));
    const started = await esopt('runs', 'start', '--config', configPath, '--json');
    expect(started.code).toBe(0);
    const { id } = JSON.parse(started.out) as { id: string };

    const watched = await esopt('runs', 'watch', id, '--json');
    expect(watched.code).toBe(0);
    const events = watched.out.trim().split('\n').map((l) => RunEvent.parse(JSON.parse(l)));
    expect(events.filter((e) => e.type === 'update-applied').map((e) => e.iteration)).toEqual([0, 1, 2]);
    expect(events.at(-1)).toEqual({ type: 'end', state: 'finished' });

    const list = await esopt('runs', 'list', '--json');
    expect(JSON.parse(list.out).runs.map((r: { id: string }) => r.id)).toEqual([id]);
    const shown = await esopt('runs', 'show', id, '--json');
    expect(JSON.parse(shown.out)).toMatchObject({ id, state: 'finished', completedIterations: 3 });
    const human = await esopt('runs', 'show', id);
    expect(human.out).toContain(`run ${id} (sudoku): finished`);
    // Judged by held-out success (the final evaluation, θ_3), the training figures labelled as such.
    const h = JSON.parse(shown.out).heldOut as { iteration: number; tasks: number };
    expect(h.iteration).toBe(3);
    expect(human.out).toMatch(new RegExp(`held-out \\d+\\.\\d% \\[95% CI [\\d.]+%–[\\d.]+%\\] of ${h.tasks} at θ_3`));
    expect(human.out).toContain('latest iteration 2 (training): mean reward');
    expect((await esopt('runs', 'list')).out).toMatch(new RegExp(`${id}.* @3`));
    // A finished run cannot be stopped: the server's 409 becomes exit 1 with its message.
    const stop = await esopt('runs', 'stop', id, '--json');
    expect(stop.code).toBe(1);
    expect(stop.err).toContain('HTTP 409');

    // Its model out through GET /runs/{id}/model: the tarball of `esopt export`, θ_3 as the log says.
    const archive = join(dir, 'model.tar');
    const downloaded = await esopt('runs', 'model', id, '--out', archive, '--json');
    expect(downloaded.code, downloaded.err).toBe(0);
    const got = JSON.parse(downloaded.out) as { iteration: number; sha256: string; thetaHash: string };
    expect(got.iteration).toBe(3);
    expect(createHash('sha256').update(readFileSync(archive)).digest('hex')).toBe(got.sha256);
    const log = readFileSync(join(api.storeRoot, 'runs', id, 'log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { thetaHashAfter: string });
    expect(got.thetaHash).toBe(log[2].thetaHashAfter);
    const unpacked = join(dir, 'model');
    mkdirSync(unpacked);
    await extract({ file: archive, cwd: unpacked });
    const model = loadModelDir(unpacked);
    expect(hashTheta(model.weights)).toBe(log[2].thetaHashAfter);
    // θ_0 is the base model; an iteration past the log is refused with the field named.
    const base = await esopt('runs', 'model', id, '--out', join(dir, 'base.tar'), '--iteration', '0', '--format', 'safetensors', '--json');
    expect(base.code, base.err).toBe(0);
    const past = await esopt('runs', 'model', id, '--out', join(dir, 'past.tar'), '--iteration', '9');
    expect([past.code, past.err]).toEqual([1, expect.stringContaining('iteration: run')]);

    // A finished run goes on only with more iterations: the server's 400 names the field.
    const same = await esopt('runs', 'resume', id);
    expect([same.code, same.err]).toEqual([1, expect.stringContaining('HTTP 400: iterations: run')]);
    const resumed = await esopt('runs', 'resume', id, '--iterations', '4', '--max-episodes', '50');
    expect(resumed.code, resumed.err).toBe(0);
    expect(resumed.out).toMatch(/resumed after 3 of 4 iterations \((requested|running)\); iterations 3 → 4, budget\.maxEpisodes none → 50/);
    await api.runs.settled();
    expect(JSON.parse((await esopt('runs', 'show', id, '--json')).out)).toMatchObject({ state: 'finished', completedIterations: 4, iterations: 4 });
  });

  it('bad usage exits 2 naming the problem; a missing token is a usage error', async () => {
    expect(await esopt('runs', 'show')).toMatchObject({ code: 2, err: expect.stringContaining('give exactly one run id') });
    const badConfig = join(dir, 'bad.json');
    writeFileSync(badConfig, JSON.stringify({ ...tinyRunConfig(), iterations: 0 }));
    expect(await esopt('runs', 'start', '--config', badConfig)).toMatchObject({ code: 2, err: expect.stringContaining('iterations') });
    expect(await esopt('runs', 'show', 'no-such-run')).toMatchObject({ code: 1, err: expect.stringContaining('HTTP 404') });
    delete process.env.ESOPT_TOKEN;
    try {
      expect(await esopt('runs', 'list')).toMatchObject({ code: 2, err: expect.stringContaining('ESOPT_TOKEN') });
    } finally {
      process.env.ESOPT_TOKEN = TOKEN;
    }
  });
});

describe('esopt evals', () => {
  it('start --wait with the key from --api-key-env, then show', async () => {
    process.env.AGENT_KEY = 'sk-cli';
    const request = {
      model: { kind: 'external', baseUrl: agent.baseUrl, model: 'their-agent' },
      environment: { name: 'sudoku', options: { size: 4, blanks: 2 } },
      tasks: { tasks: TASKS },
      episodes: 4,
      budget: { maxEpisodes: 3 },
    };
    const started = await esopt('evals', 'start', '--request', JSON.stringify(request), '--api-key-env', 'AGENT_KEY', '--wait', '--json');
    expect(started.code).toBe(0);
    const view = JSON.parse(started.out);
    expect(view.status).toMatchObject({ state: 'finished', stopReason: 'max-episodes' });
    expect(view.summary).toMatchObject({ episodes: 3, successes: 3, successRate: 1 });

    const shown = await esopt('evals', 'show', view.id);
    expect(shown.code).toBe(0);
    expect(shown.out).toContain(`evaluation ${view.id}: finished (max-episodes)`);
    expect(shown.out).toContain('success 100.0%');
    expect(shown.out.split('\n').filter((l) => /^\s+\d+\s+sudoku-/.test(l))).toHaveLength(3);
    expect((await esopt('evals', 'start', '--request', '{"episodes": 0}')).code).toBe(2);
  });
});

describe('esopt api', () => {
  it('serves the API until SIGINT, and will not start without ESOPT_TOKEN', async () => {
    const store = join(dir, 'api-store');
    const env = { ...process.env, ESOPT_TOKEN: TOKEN };
    const child = spawn(process.execPath, ['trainer/cli/bin.js', 'api', '--port', '0', '--store', store, '--json'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += String(d);
        const line = out.split('\n').find((l) => l.startsWith('{'));
        if (line) resolve(JSON.parse(line).url);
      });
      child.once('exit', (code) => reject(new Error(`esopt api exited with ${code}`)));
    });
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ ok: true });
    expect((await fetch(`${url}/runs`)).status).toBe(401);
    expect((await fetch(`${url}/runs`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGINT');
    expect(await exited).toBe(0);

    const { ESOPT_TOKEN: _token, ...without } = env;
    const refused = spawnSync(process.execPath, ['trainer/cli/bin.js', 'api', '--port', '0', '--store', store], { env: without, encoding: 'utf8' });
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain('set ESOPT_TOKEN');
  });

  it('off loopback starts only with a token of 32+ characters, and then checks requests as a deployed stack', async () => {
    const store = join(dir, 'api-open-store');
    const args = ['trainer/cli/bin.js', 'api', '--host', '0.0.0.0', '--port', '0', '--store', store, '--json'];
    const { ESOPT_TOKEN: _token, ...without } = process.env;
    for (const token of [undefined, 'x'.repeat(31)]) {
      const refused = spawnSync(process.execPath, args, { env: token === undefined ? without : { ...without, ESOPT_TOKEN: token }, encoding: 'utf8', timeout: 20_000 });
      expect(refused.status).toBe(2);
      expect(refused.stderr).toContain(token === undefined ? 'set ESOPT_TOKEN' : 'at least 32 characters');
    }
    const long = 'y'.repeat(32);
    const child = spawn(process.execPath, args, { env: { ...without, ESOPT_TOKEN: long }, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d) => {
          out += String(d);
          const line = out.split('\n').find((l) => l.startsWith('{'));
          if (line) resolve(JSON.parse(line).url.replace('0.0.0.0', '127.0.0.1'));
        });
        child.once('exit', (code) => reject(new Error(`esopt api exited with ${code}`)));
      });
      const auth = { authorization: `Bearer ${long}`, 'content-type': 'application/json' };
      expect((await fetch(`${url}/runs`)).status).toBe(401);
      const res = await fetch(`${url}/runs`, { method: 'POST', headers: auth, body: JSON.stringify(tinyRunConfig({ model: { dir: 'models/sudoku-6x6-grid' } })) });
      expect(res.status).toBe(400);
      expect(JSON.stringify(await res.json())).toContain('opens no path');
      expect((await (await fetch(`${url}/runs`, { headers: auth })).json())).toMatchObject({ runs: [] });
    } finally {
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGINT');
      expect(await exited).toBe(0);
    }
  }, 30_000);
});
