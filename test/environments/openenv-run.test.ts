/**
 * A short embedded ES run on the Python reference OpenEnv server: the tiny preset model answers in json mode,
 * episodes are counted and rewards recorded (whatever their values: the tiny model is untrained).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RewardRecord, RunConfig } from '../../shared/schemas/index.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { silentProgress } from '../../trainer/training/loop/progress.ts';

const hasPython = spawnSync('python3', ['--version']).status === 0;
const root = mkdtempSync(join(tmpdir(), 'esopt-openenv-run-'));

describe.skipIf(!hasPython)('an embedded run against an OpenEnv server', () => {
  let child: ChildProcess;
  let url = '';
  beforeAll(async () => {
    child = spawn('python3', ['examples/openenv/server.py', '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
    url = `http://127.0.0.1:${await new Promise<string>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())))}`;
  });
  afterAll(() => {
    child.kill();
    rmSync(root, { recursive: true, force: true });
  });

  it('trains for an iteration and records every episode', async () => {
    const config = RunConfig.parse({
      environment: { name: 'openenv', options: { url, horizon: 2, action: { as: 'json' } } },
      tasks: { seed: 1, trainPerIteration: 2, evalCount: 2 },
      model: { preset: 'tiny' },
      localEpisodes: 'in-process',
      es: { population: 2, sigma: 0.05, alpha: 0.05 },
      generation: { temperature: 1, topP: 1, topK: 0, maxTokens: 8 },
      iterations: 1,
      evalInterval: 1,
      checkpointInterval: 1,
      workers: 2,
      seed: 3,
    });
    const { report } = await runEmbedded({ config, run: 'openenv', storeRoot: root, progress: silentProgress });
    const rewards = join(root, 'runs', 'openenv', 'iterations');
    const files = readdirSync(rewards).flatMap((k) => (readdirSync(join(rewards, k, 'rewards'), { recursive: true }) as string[]).filter((f) => f.endsWith('.json')).map((f) => join(rewards, k, 'rewards', f)));
    expect(files.length).toBeGreaterThanOrEqual(4);
    const records = files.map((f) => RewardRecord.parse(JSON.parse(readFileSync(f, 'utf8'))));
    // Played against the server (steps taken, no failed episode), rewards recorded.
    expect(records.every((r) => r.error === null && r.steps > 0 && Number.isFinite(r.reward))).toBe(true);
    expect(report.evaluations.length).toBeGreaterThan(0);
  }, 180_000);
});
