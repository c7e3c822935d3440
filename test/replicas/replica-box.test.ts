/**
 * The replica box's service (trainer/cloud/box/replica-box.ts) on loopback with the fs store: it follows
 * the run the coordinator names in trainer/active-run.json while its status is running (the coordinator
 * routes members to it at its public URL and it ends on the coordinator's θ), follows one start of a run
 * once, ignores a run that is not running, and lets a run go when it is stopped.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { IterationManifest, ReplicaAnnouncement, RunConfig, type ActiveRun, type RunStatus } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { silentProgress } from '../../trainer/training/loop/progress.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';
import { ReplicaBox } from '../../trainer/cloud/box/replica-box.ts';
import { TokenFollower } from '../../trainer/serving/token-follower.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-replica-box-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const config = RunConfig.parse({
  environment: { name: 'sudoku', options: { size: 4, blanks: 4, invalidMove: 'waste', observation: 'next-cell', constrainActions: true, shapedReward: true } },
  tasks: { seed: 3, trainPerIteration: 2, evalCount: 2 },
  model: { dir: 'models/sudoku-4x4-demo' },
  mode: 'full',
  es: { population: 4, sigma: 0.05, alpha: 0.05 },
  generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 12 },
  iterations: 2,
  evalInterval: 2,
  checkpointInterval: 2,
  workers: 2,
  deadlineMs: 60_000,
  seed: 9,
});

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

const status = (run: string, state: RunStatus['state']): RunStatus => {
  const now = new Date().toISOString();
  return { run, state, requestedAt: now, startedAt: now, finishedAt: null, error: null, updatedAt: now };
};

describe('the replica box', () => {
  it('follows the run the coordinator names while it runs, once per start, and lets a stopped run go', async () => {
    const store = new FsObjectStore(join(root, 'store'));
    const port = await freePort();
    const publicUrl = `http://127.0.0.1:${port}/v1`;
    const lines: string[] = [];
    const box = new ReplicaBox({ store, id: 'replica-1', publicUrl, host: '127.0.0.1', port, token: 'box-token', pollMs: 30, followPollMs: 20, log: { info: (_f: object, m: string) => lines.push(m), error: (_f: object, m: string) => lines.push(`error ${m}`) } });
    try {
      // Nothing named yet, then a run that is not running: nothing to follow.
      expect(await box.pollOnce()).toBeNull();
      const active: ActiveRun = { run: 'r', startedAt: new Date().toISOString() };
      await writeJson(store, keys.activeRun(), active);
      await writeJson(store, keys.runStatus('r'), status('r', 'requested'));
      expect(await box.pollOnce()).toBeNull();

      // The coordinator box's side: the run is running, and it expects one replica besides itself.
      await writeJson(store, keys.runStatus('r'), status('r', 'running'));
      const following = box.pollOnce();
      const { result } = await runEmbedded({ config, run: 'r', storeRoot: join(root, 'store'), progress: silentProgress, pollMs: 20, token: 'box-token', replicas: { syncTimeoutMs: 30_000, expected: 1 } });
      expect(await following).toBe('r');
      // It announced its public URL, was routed members, and reported the coordinator's final θ.
      expect((await readJson(store, keys.replica('r', 'replica-1'), ReplicaAnnouncement))?.baseUrl).toBe(publicUrl);
      const manifest = await readJson(store, keys.manifest('r', 1), IterationManifest);
      expect(manifest?.routing?.replicas).toEqual([expect.objectContaining({ id: 'coordinator' }), { id: 'replica-1', baseUrl: publicUrl }]);
      expect(manifest?.routing?.routes.filter((r) => r.replica === 1).length).toBeGreaterThan(0);
      const final = JSON.parse(new TextDecoder().decode((await store.get(keys.replicaReport('r', config.iterations, 'replica-1')))!)) as { thetaHash: string };
      expect(final.thetaHash).toBe(result.thetaHash);
      expect(lines).toContain('run followed to its last update');

      // The same start is not followed twice.
      expect(await box.pollOnce()).toBeNull();

      // A run the coordinator starts and then stops before its end: the replica joins, then lets it go.
      await writeJson(store, keys.config('s'), config);
      await writeJson(store, keys.runStatus('s'), status('s', 'running'));
      await writeJson(store, keys.activeRun(), { run: 's', startedAt: new Date().toISOString() } satisfies ActiveRun);
      const stopping = box.pollOnce();
      while (!(await store.get(keys.replica('s', 'replica-1')))) await new Promise((r) => setTimeout(r, 20));
      await writeJson(store, keys.runStatus('s'), status('s', 'stopped'));
      expect(await stopping).toBe('s');
      expect(lines).toContain('the coordinator stopped this run or moved on: replica released');
      // Its port is free again for the next run.
      await new Promise<void>((resolve, reject) => {
        const s = createServer().once('error', reject).listen(port, '127.0.0.1', () => s.close(() => resolve()));
      });
    } finally {
      await box.close();
    }
  });

  it('behind the token gate, follows a rotation during a run: the old token in its grace, the new one, a stranger refused', async () => {
    const store = new FsObjectStore(join(root, 'gated'));
    const port = await freePort();
    const publicUrl = `http://127.0.0.1:${port}/v1`;
    let current = 'box-token';
    // No wait before the re-read an unknown token triggers: the stranger's 401 comes while the run is still served.
    const tokens = new TokenFollower({ initial: current, read: async () => current, refreshMs: 30, graceMs: 60_000, missRefreshMs: 0 });
    tokens.start();
    const box = new ReplicaBox({ store, id: 'replica-1', publicUrl, host: '127.0.0.1', port, token: 'box-token', tokens, pollMs: 30, followPollMs: 20, log: { info() {}, error() {} } });
    const models = async (token: string) => {
      const res = await fetch(`${publicUrl}/models`, { headers: { authorization: `Bearer ${token}` } });
      await res.arrayBuffer();
      return res.status;
    };
    try {
      await writeJson(store, keys.activeRun(), { run: 'g', startedAt: new Date().toISOString() } satisfies ActiveRun);
      await writeJson(store, keys.runStatus('g'), status('g', 'running'));
      const following = box.pollOnce();
      // The coordinator's workers send the token they started with throughout: the grace keeps it good.
      // Long enough that the checks below land while the replica serves.
      const long = RunConfig.parse({ ...config, iterations: 6, evalInterval: 6, checkpointInterval: 6 });
      const run = runEmbedded({ config: long, run: 'g', storeRoot: join(root, 'gated'), progress: silentProgress, pollMs: 20, token: 'box-token', replicas: { syncTimeoutMs: 30_000, expected: 1 } });
      while (!(await store.get(keys.replica('g', 'replica-1')))) await new Promise((r) => setTimeout(r, 20));
      current = 'rotated-token';
      expect(await models('rotated-token')).toBe(200);
      expect(await models('box-token')).toBe(200);
      expect(await models('a-stranger')).toBe(401);
      const { result } = await run;
      expect(await following).toBe('g');
      const final = JSON.parse(new TextDecoder().decode((await store.get(keys.replicaReport('g', long.iterations, 'replica-1')))!)) as { thetaHash: string };
      expect(final.thetaHash).toBe(result.thetaHash);
      // The members routed to it were served through the gate, none refused.
      const manifest = await readJson(store, keys.manifest('g', 1), IterationManifest);
      expect(manifest?.routing?.routes.filter((r) => r.replica === 1).length).toBeGreaterThan(0);
    } finally {
      await box.close();
      tokens.close();
    }
  });

  it('refuses an https public URL without a TLS identity', () => {
    const store = new FsObjectStore(join(root, 'tls'));
    expect(() => new ReplicaBox({ store, id: 'replica-1', publicUrl: 'https://203.0.113.9:8080/v1', host: '127.0.0.1', port: 1, token: 't', pollMs: 50, log: { info() {}, error() {} } as never })).toThrow(/https with a TLS identity/);
  });
});
