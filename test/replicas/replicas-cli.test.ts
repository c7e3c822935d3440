/**
 * `esopt train --replicas 2` through the CLI: a second `esopt replica` process follows the run in the
 * same store, members are routed to it once it reports θ, and it ends on the trainer's final θ.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { IterationManifest, ReplicaReport } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';

const BIN = join(import.meta.dirname, '../../trainer/cli/bin.js');
const root = mkdtempSync(join(tmpdir(), 'esopt-replicas-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const run = promisify(execFile);

const config = {
  environment: { name: 'sudoku', options: { size: 4, blanks: 4, invalidMove: 'waste', observation: 'next-cell', constrainActions: true, shapedReward: true } },
  tasks: { seed: 3, trainPerIteration: 2, evalCount: 2 },
  model: { dir: 'models/sudoku-4x4-demo' },
  es: { population: 4, sigma: 0.05, alpha: 0.05 },
  generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 12 },
  iterations: 4,
  evalInterval: 4,
  checkpointInterval: 2,
  workers: 2,
  deadlineMs: 60_000,
  seed: 9,
};

describe('esopt train --replicas', () => {
  it('runs a replica process that serves members and ends on the same θ', async () => {
    const path = join(root, 'config.json');
    writeFileSync(path, JSON.stringify(config));
    const store = join(root, 'store');
    const { stdout } = await run(process.execPath, [BIN, 'train', '--config', path, '--run', 'two', '--store', store, '--replicas', '2', '--json'], { timeout: 120_000 });
    const report = JSON.parse(stdout) as { thetaHash: string };
    const fs = new FsObjectStore(store);
    const read = async <T>(key: string, schema: { parse: (v: unknown) => T }) => schema.parse(JSON.parse(new TextDecoder().decode((await fs.get(key))!)));
    const final = await read(keys.replicaReport('two', config.iterations, 'replica-1'), ReplicaReport);
    expect(final.thetaHash).toBe(report.thetaHash);
    const routed = [];
    for (let k = 0; k < config.iterations; k++) routed.push((await read(keys.manifest('two', k), IterationManifest)).routing?.replicas.map((r) => r.id));
    // The trainer waits for the replica it started before its first iteration, and the replica serves every one.
    expect(routed).toEqual(Array(config.iterations).fill(['coordinator', 'replica-1']));
  }, 150_000);

  it('refuses --replicas for a scripted policy, naming the flag', async () => {
    const path = join(root, 'scripted.json');
    writeFileSync(path, JSON.stringify({ ...config, policy: 'scripted:random' }));
    const failed = await run(process.execPath, [BIN, 'train', '--config', path, '--store', join(root, 's2'), '--replicas', '2']).catch((e: { code: number; stderr: string }) => e);
    expect(failed).toMatchObject({ code: 2, stderr: expect.stringMatching(/--replicas: replicas serve the model's members/) });
  });

  it('esopt bench replicas measures both counts side by side and prices them', async () => {
    const { stdout } = await run(process.execPath, [BIN, 'bench', 'replicas', '--episodes', '6', '--concurrency', '3', '--rounds', '1', '--json'], { timeout: 120_000 });
    const r = JSON.parse(stdout) as Record<string, unknown> & { rounds: Array<{ replicas: number; episodes_per_s: number }> };
    expect(r.rounds.map((x) => x.replicas).sort()).toEqual([1, 2]);
    expect(r.scaling).toBeCloseTo((r.episodes_per_s_2 as number) / (r.episodes_per_s_1 as number), 9);
    expect(r.usd_per_1000_episodes_1).toBeGreaterThan(0);
    expect(typeof r.pinned).toBe('boolean');
  }, 150_000);
});
